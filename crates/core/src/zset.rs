//! A sorted set (Redis's t_zset.c): "listpack" while small, "skiplist" beyond.
//!
//! (Scaffold: the representation is being written; this placeholder only lets the rest of the tree
//! name the type.)

/// A sorted set (Redis's t_zset.c): "listpack" while small, "skiplist" beyond.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ZSet {
    len: usize,
}

impl ZSet {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are no elements (the key is then deleted by the write that emptied it).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The encoding OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        "scaffold"
    }

    /// Heap bytes owned (approximate, O(1)).
    pub fn heap_size(&self) -> usize {
        0
    }
}
