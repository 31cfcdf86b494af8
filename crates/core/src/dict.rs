//! The chained hash table that holds a database's entries.
//!
//! Chaining (rather than open addressing) is chosen for two reasons: the chain link lives inside the
//! entry's own allocation, so the table costs one pointer per bucket (8 bytes per key at full load
//! instead of ~19 for an open-addressed table at its worst load factor), and every key has exactly one
//! home bucket, `hash & mask`, which is what makes Redis's reverse-binary SCAN cursor sound: a key
//! present for the whole scan is returned at least once even if the table grows or shrinks meanwhile.
//!
//! Invariants: `buckets.len()` is 0 or a power of two; `len` counts the entries reachable from the
//! buckets; the table grows when `len` would exceed `buckets.len()` (load factor 1) and shrinks when
//! fewer than 1/8 of the buckets would be used. Resizing is done in one step.

use std::hash::BuildHasher;

use crate::entry::Entry;

const MIN_BUCKETS: usize = 4;

/// A hash table of [`Entry`] keyed by the entry's key bytes.
pub struct Dict {
    buckets: Vec<Option<Entry>>,
    len: usize,
    hasher: foldhash::quality::RandomState,
}

impl Default for Dict {
    fn default() -> Self {
        Self::new()
    }
}

impl Dict {
    /// An empty table; allocates nothing until the first insert.
    pub fn new() -> Self {
        Dict {
            buckets: Vec::new(),
            len: 0,
            hasher: foldhash::quality::RandomState::default(),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes used by the bucket array.
    pub fn table_size(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<Option<Entry>>()
    }

    fn bucket_of(&self, key: &[u8]) -> usize {
        (self.hasher.hash_one(key) as usize) & (self.buckets.len() - 1)
    }

    /// The link (bucket slot or predecessor's `next`) that holds `key`'s entry.
    fn link(&self, key: &[u8]) -> Option<*mut Option<Entry>> {
        if self.len == 0 {
            return None;
        }
        let mut link =
            &self.buckets[self.bucket_of(key)] as *const Option<Entry> as *mut Option<Entry>;
        // SAFETY: links point into `self.buckets` or into live entries owned by this table.
        unsafe {
            while let Some(e) = &*link {
                if e.key() == key {
                    return Some(link);
                }
                link = e.next() as *const Option<Entry> as *mut Option<Entry>;
            }
        }
        None
    }

    /// The entry for `key`.
    pub fn get(&self, key: &[u8]) -> Option<&Entry> {
        // SAFETY: the link is valid while &self is borrowed.
        self.link(key).and_then(|l| unsafe { (*l).as_ref() })
    }

    /// The entry for `key`, mutably (for in-place changes; use [`Dict::replace`] to reallocate).
    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        // SAFETY: the link is valid while &mut self is borrowed, and nothing else aliases it.
        self.link(key).and_then(|l| unsafe { (*l).as_mut() })
    }

    /// Inserts `entry`, returning the entry it replaced (same key), if any.
    pub fn insert(&mut self, mut entry: Entry) -> Option<Entry> {
        if let Some(link) = self.link(entry.key()) {
            // SAFETY: `link` holds Some(entry) for this key; we swap it keeping the chain.
            unsafe {
                let mut old = (*link).take().expect("link holds an entry");
                *entry.next_mut() = old.next_mut().take();
                *link = Some(entry);
                return Some(old);
            }
        }
        if self.len >= self.buckets.len() {
            self.resize((self.len + 1).next_power_of_two().max(MIN_BUCKETS));
        }
        let b = self.bucket_of(entry.key());
        *entry.next_mut() = self.buckets[b].take();
        self.buckets[b] = Some(entry);
        self.len += 1;
        None
    }

    /// Removes and returns the entry for `key`.
    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let link = self.link(key)?;
        // SAFETY: `link` holds Some(entry); we splice its successor into the link.
        let mut e = unsafe {
            let mut e = (*link).take().expect("link holds an entry");
            *link = e.next_mut().take();
            e
        };
        *e.next_mut() = None;
        self.len -= 1;
        if self.buckets.len() > MIN_BUCKETS && self.len * 8 < self.buckets.len() {
            self.resize(self.len.next_power_of_two().max(MIN_BUCKETS));
        }
        Some(e)
    }

    /// Replaces `key`'s entry with `f(entry)`, which must keep the same key. Returns false if absent.
    pub fn replace(&mut self, key: &[u8], f: impl FnOnce(Entry) -> Entry) -> bool {
        let Some(link) = self.link(key) else {
            return false;
        };
        // SAFETY: `link` holds Some(entry); the chain tail is detached while `f` runs, then restored.
        unsafe {
            let mut e = (*link).take().expect("link holds an entry");
            let tail = e.next_mut().take();
            let mut new = f(e);
            debug_assert_eq!(new.key(), key);
            *new.next_mut() = tail;
            *link = Some(new);
        }
        true
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.buckets = Vec::new();
        self.len = 0;
    }

    fn resize(&mut self, size: usize) {
        let old = std::mem::replace(&mut self.buckets, (0..size).map(|_| None).collect());
        for mut head in old {
            while let Some(mut e) = head {
                head = e.next_mut().take();
                let b = self.bucket_of(e.key());
                *e.next_mut() = self.buckets[b].take();
                self.buckets[b] = Some(e);
            }
        }
    }

    /// Calls `f` on every entry of the bucket(s) at `cursor` and returns the next cursor (0 = done).
    ///
    /// Redis's reverse-binary cursor: the high bits of the cursor are incremented, so buckets that
    /// split or merge on a resize are visited consistently and no key present throughout is missed.
    pub fn scan(&self, cursor: u64, mut f: impl FnMut(&Entry)) -> u64 {
        if self.buckets.is_empty() {
            return 0;
        }
        let mask = (self.buckets.len() - 1) as u64;
        let mut link = &self.buckets[(cursor & mask) as usize];
        while let Some(e) = link {
            f(e);
            link = e.next();
        }
        let mut v = cursor | !mask;
        v = v.reverse_bits().wrapping_add(1).reverse_bits();
        v
    }

    /// A pseudo-random entry chosen with the caller's random numbers `rand()`.
    pub fn random(&self, mut rand: impl FnMut() -> u64) -> Option<&Entry> {
        if self.len == 0 {
            return None;
        }
        let mask = self.buckets.len() as u64 - 1;
        // The table is at least 1/8 full, so a non-empty bucket is found quickly; cap the tries and
        // fall back to a linear walk from a random start so the loop is bounded.
        let start = (rand() & mask) as usize;
        let head = (0..64)
            .map(|_| &self.buckets[(rand() & mask) as usize])
            .find(|b| b.is_some())
            .or_else(|| {
                (0..self.buckets.len())
                    .map(|i| &self.buckets[(start + i) & mask as usize])
                    .find(|b| b.is_some())
            })?;
        let mut chain = Vec::new();
        let mut link = head;
        while let Some(e) = link {
            chain.push(e);
            link = e.next();
        }
        Some(chain[(rand() % chain.len() as u64) as usize])
    }

    /// Iterates over every entry (used by KEYS and snapshots).
    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.buckets.iter().flat_map(|head| {
            let mut link = head.as_ref();
            std::iter::from_fn(move || {
                let e = link?;
                link = e.next().as_ref();
                Some(e)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::{Value, ValueRef};
    use std::collections::HashSet;

    fn e(k: &str, v: i64) -> Entry {
        Entry::new(k.as_bytes(), Value::Int(v), None, 0)
    }

    #[test]
    fn insert_get_replace_remove() {
        let mut d = Dict::new();
        for i in 0..1000 {
            assert!(d.insert(e(&format!("k{i}"), i)).is_none());
        }
        assert_eq!(d.len(), 1000);
        let old = d.insert(e("k5", 55)).expect("replaced");
        assert_eq!(old.value(), ValueRef::Int(5));
        assert_eq!(d.get(b"k5").map(|e| e.value()), Some(ValueRef::Int(55)));
        assert!(d.replace(b"k7", |old| old.with_expire(Some(9))));
        assert_eq!(d.get(b"k7").and_then(|e| e.expire()), Some(9));
        for i in 0..1000 {
            assert!(d.remove(format!("k{i}").as_bytes()).is_some());
        }
        assert!(d.is_empty() && d.get(b"k1").is_none());
        assert!(d.table_size() <= MIN_BUCKETS * 8);
    }

    #[test]
    fn scan_sees_every_stable_key_across_resizes() {
        let mut d = Dict::new();
        for i in 0..500 {
            d.insert(e(&format!("stable{i}"), i));
        }
        let mut seen = HashSet::new();
        let mut cursor = 0;
        let mut step = 0;
        loop {
            cursor = d.scan(cursor, |e| {
                seen.insert(e.key().to_vec());
            });
            // Grow and shrink the table while scanning.
            step += 1;
            if step % 3 == 0 {
                for j in 0..200 {
                    d.insert(e(&format!("tmp{step}-{j}"), j));
                }
            } else if step % 3 == 1 {
                for j in 0..200 {
                    d.remove(format!("tmp{}-{j}", step - 1).as_bytes());
                }
            }
            if cursor == 0 {
                break;
            }
        }
        for i in 0..500 {
            assert!(
                seen.contains(format!("stable{i}").as_bytes()),
                "missed stable{i}"
            );
        }
    }

    #[test]
    fn random_and_iter() {
        let mut d = Dict::new();
        assert!(d.random(|| 1).is_none());
        for i in 0..10 {
            d.insert(e(&format!("k{i}"), i));
        }
        let mut x = 88172645463325252u64;
        let mut rng = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        assert!(d.random(&mut rng).is_some());
        assert_eq!(d.iter().count(), 10);
    }
}
