//! Per-shard lock table: how multi-key commands and transactions stay atomic without locking data.
//!
//! A command that spans shards (MSET, RENAME, FLUSHALL, ...) or a transaction (MULTI/EXEC, a script)
//! first takes locks on everything it touches, shard by shard in ascending shard order, then runs its
//! parts, then releases. Other commands ask [`LockTable::may_run`] and run at once when nothing they
//! touch conflicts; otherwise they queue like any other request.
//!
//! What is locked ([`LockKey`]): a key of a database, or a whole database. Databases use
//! *intention locks*: a request for a key takes the key's database implicitly in
//! [`LockMode::IntentShared`] (reading a key) or [`LockMode::IntentExclusive`] (writing one).
//! Intentions never conflict with each other, so unrelated keys never wait for each other; they
//! conflict with whole-database locks (FLUSHDB/FLUSHALL/SWAPDB take the database
//! [`LockMode::Exclusive`], KEYS [`LockMode::Shared`]), which is what makes FLUSHALL atomic with
//! respect to multi-key commands.
//!
//! Who holds a lock ([`Owner`]): every request carries an owner, a lock context. A single
//! multi-shard command is one owner; a transaction is one owner across all its commands. An owner's
//! requests never conflict with its own holds (re-entrant), and every grant is counted, so each
//! [`LockTable::release`] undoes exactly one [`LockTable::acquire`].
//!
//! Grant rule. Requests are numbered in arrival order ([`LockId`], per table). A request is granted
//! when, for every item it wants,
//! 1. its mode is compatible with the holds of every *other* owner on the item, and
//! 2. no *earlier* request with a conflicting mode is queued on the item — unless the request's owner
//!    already held a lock in this table when the request arrived (a "re-entrant" request: see below).
//!
//! A request enqueues on all its items in one step (the shard is single-threaded) and is granted on
//! all of them in one step.
//!
//! Why no deadlock, given the protocol every caller follows: an owner acquires in ascending shard
//! order, one request per shard, and once it holds locks on a shard its later requests there only
//! re-enter what it holds without strengthening it (they are then granted at once). Waits-for edges
//! are of two kinds: (a) a queued request waits for an earlier queued request on the same shard
//! (rule 2), or (b) it waits for an owner holding a conflicting lock (rule 1); that owner, if it waits
//! at all, waits on a strictly higher shard (it holds here and acquires in ascending order, and its
//! re-entries here never wait). So along any chain of waits, (shard, -arrival) strictly increases
//! lexicographically: no cycle. Re-entrant requests skip rule 2 because waiting behind a request that
//! itself waits for their owner would be a cycle; they wait only for other owners' holds.
//!
//! Why fair: rule 2 serves conflicting requests in arrival order, so a queued database-exclusive
//! request (FLUSHALL) is not overtaken by key requests arriving after it in that database, while
//! compatible requests (two readers, two writers of different keys) pass each other freely.
//!
//! Cancellation: [`LockTable::cancel`] withdraws a queued request (granting whatever it was holding
//! up) or releases a granted one, and ignores an unknown id, so a coordinator that is dropped at any
//! point can always be undone.
//!
//! Light holds: a request granted at once on keys that are not in the table and that no other light
//! request may hold keeps its key holds in its own list, counted in a per-shard filter, instead of
//! table items (see `Light`). Every check consults both; before a request that is not light is
//! checked, held or queued, the light requests holding its keys become ordinary items
//! (`materialize`). So the rules above only ever see items, and a light hold is only a cheaper way
//! of holding the same lock: nobody waits for a key held light.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};

use hashbrown::HashMap;

/// A lock context: a multi-shard command, or a transaction across all its commands. Never 0.
pub type Owner = u64;

/// One request in one lock table (unique per table, increasing in arrival order).
pub type LockId = u64;

static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

/// A fresh owner, unique in the process.
pub fn new_owner() -> Owner {
    NEXT_OWNER.fetch_add(1, Ordering::Relaxed)
}

/// Owner 0 is never allocated: it stands for "no context" and holds nothing.
const NOBODY: Owner = 0;

/// What a lock protects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LockKey {
    /// A whole database.
    Db(u32),
    /// One key of one database, by its 64-bit [`fingerprint`]. Two keys with the same fingerprint
    /// share a lock: a false conflict only makes one wait for the other, never breaks exclusion or
    /// deadlock freedom (a lock set is still taken whole, shards in ascending order), and it makes
    /// the uncontended path cheap: no key bytes copied, compared or freed, one hash per key.
    Key(u32, u64),
}

impl LockKey {
    /// The item for `key` of `db`.
    pub fn key(db: u32, key: &[u8]) -> LockKey {
        LockKey::Key(db, fingerprint(key))
    }
}

/// A 64-bit hash of the key of database `db` whose [`fingerprint`] is `fp`: the fingerprint with
/// the database mixed in (one multiply). The lock table's items, its filter of light holds and the
/// key versions (`crate::versions`) all index by it.
#[inline]
pub(crate) fn key_hash(db: u32, fp: u64) -> u64 {
    fp ^ u64::from(db).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// A key's lock fingerprint: the same for the same bytes everywhere in the process.
pub fn fingerprint(key: &[u8]) -> u64 {
    use std::hash::BuildHasher;
    const STATE: foldhash::fast::FixedState =
        foldhash::fast::FixedState::with_seed(0x5eed_1234_abcd_0042);
    STATE.hash_one(key)
}

/// How a command uses a key (or, through [`LockSet::add_db`], a whole database).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Shared,
    Exclusive,
}

/// A lock mode on one item. Keys are only ever locked `Shared` or `Exclusive`; databases also in the
/// intention modes, which their keys' locks imply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    /// Some key of the database is read.
    IntentShared = 0,
    /// Some key of the database is written.
    IntentExclusive = 1,
    Shared = 2,
    Exclusive = 3,
}

/// Bit `m` of `CONFLICTS[x]` is set when modes `x` and `m` conflict.
const CONFLICTS: [u8; 4] = [0b1000, 0b1100, 0b1010, 0b1111];

impl LockMode {
    const ALL: [LockMode; 4] = [
        LockMode::IntentShared,
        LockMode::IntentExclusive,
        LockMode::Shared,
        LockMode::Exclusive,
    ];

    fn conflicts(self, other: LockMode) -> bool {
        CONFLICTS[self as usize] & (1 << other as usize) != 0
    }

    /// The weakest mode at least as strong as both (no SIX mode: IX with S is X).
    fn join(self, other: LockMode) -> LockMode {
        use LockMode::*;
        match (self, other) {
            (a, b) if a == b => a,
            (IntentShared, m) | (m, IntentShared) => m,
            _ => Exclusive,
        }
    }

    fn of_key(mode: Mode) -> LockMode {
        match mode {
            Mode::Shared => LockMode::Shared,
            Mode::Exclusive => LockMode::Exclusive,
        }
    }

    fn intent(mode: Mode) -> LockMode {
        match mode {
            Mode::Shared => LockMode::IntentShared,
            Mode::Exclusive => LockMode::IntentExclusive,
        }
    }
}

/// What one request asks for on one shard: items with their modes, each item once (the strongest
/// mode asked for wins). Keys go in a vector, deduplicated as they come while the set is small and
/// by one sort when it is handed to the table once it is not; databases (one or two per request)
/// are kept apart, each once. No hashing and one allocation for a pipeline's sub-batch, which
/// builds one of these per part. A 128-bit filter of the keys' fingerprints spares the search for
/// a key that cannot be in the set yet (most of them: a pipeline's keys are mostly distinct).
#[derive(Clone, Debug, Default)]
pub struct LockSet {
    keys: Vec<(LockKey, LockMode)>,
    /// Bit `fingerprint >> 57` (its top 7 bits) of every key in `keys`.
    seen: u128,
    /// True while `keys` may hold an item twice.
    repeats: bool,
    dbs: Vec<(u32, LockMode)>,
}

/// Up to this many keys, a new key is looked for among those already in the set.
const SCAN_BELOW: usize = 16;

impl LockSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty set with room for `keys` keys (and the databases that come with them) before it
    /// reallocates: a pipeline part knows how many commands it locks for.
    pub fn with_capacity(keys: usize) -> Self {
        LockSet {
            keys: Vec::with_capacity(keys + 2),
            ..Self::default()
        }
    }

    fn add(&mut self, item: LockKey, mode: LockMode) {
        match item {
            LockKey::Db(db) => match self.dbs.iter_mut().find(|(d, _)| *d == db) {
                Some((_, m)) => *m = m.join(mode),
                None => self.dbs.push((db, mode)),
            },
            LockKey::Key(_, fp) => {
                let bit = 1u128 << (fp >> 57);
                if self.seen & bit == 0 {
                    self.seen |= bit;
                } else if self.keys.len() < SCAN_BELOW && !self.repeats {
                    if let Some((_, m)) = self.keys.iter_mut().find(|(k, _)| *k == item) {
                        *m = m.join(mode);
                        return;
                    }
                } else {
                    self.repeats = true;
                }
                self.keys.push((item, mode));
            }
        }
    }

    /// Locks `key` of `db` in `mode`, and `db` in the matching intention mode.
    pub fn add_key(&mut self, db: u32, key: &[u8], mode: Mode) {
        self.add(LockKey::key(db, key), LockMode::of_key(mode));
        self.add(LockKey::Db(db), LockMode::intent(mode));
    }

    /// Locks the whole database `db`: `Shared` (S, e.g. KEYS) or `Exclusive` (X, e.g. FLUSHDB).
    pub fn add_db(&mut self, db: u32, mode: Mode) {
        self.add(LockKey::Db(db), LockMode::of_key(mode));
    }

    /// Adds everything `other` asks for.
    pub fn extend(&mut self, other: LockSet) {
        for (item, mode) in other.into_items() {
            self.add(item, mode);
        }
    }

    /// Merges repeated keys (sorting them), so each item appears once.
    fn dedup(&mut self) {
        if !self.repeats {
            return;
        }
        self.repeats = false;
        self.keys.sort_unstable_by_key(|&(k, _)| k);
        self.keys.dedup_by(|(k, m), (kept, kept_mode)| {
            let same = k == kept;
            if same {
                *kept_mode = kept_mode.join(*m);
            }
            same
        });
    }

    /// Every item once, with its mode.
    fn into_items(mut self) -> Vec<(LockKey, LockMode)> {
        self.dedup();
        let mut items = self.keys;
        items.extend(self.dbs.iter().map(|&(db, m)| (LockKey::Db(db), m)));
        items
    }

    /// Every key of the set, as (database, fingerprint), possibly repeated.
    pub(crate) fn key_items(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.keys.iter().filter_map(|&(k, _)| match k {
            LockKey::Key(db, fp) => Some((db, fp)),
            LockKey::Db(_) => None,
        })
    }

    /// Every item, possibly repeated with weaker modes (enough to test for conflicts).
    fn iter(&self) -> impl Iterator<Item = (LockKey, LockMode)> + '_ {
        let dbs = self.dbs.iter().map(|&(db, m)| (LockKey::Db(db), m));
        self.keys.iter().copied().chain(dbs)
    }

    /// The mode this set takes `item` in, if any. A linear scan, for tests (this crate's and
    /// strata-server's, hence not `#[cfg(test)]`).
    pub fn mode_of(&self, item: &LockKey) -> Option<LockMode> {
        self.iter()
            .filter(|(k, _)| k == item)
            .map(|(_, m)| m)
            .reduce(LockMode::join)
    }

    /// Number of distinct items. Allocates and sorts, for tests (this crate's and strata-server's,
    /// hence not `#[cfg(test)]`).
    pub fn len(&self) -> usize {
        let mut keys: Vec<LockKey> = self.keys.iter().map(|&(k, _)| k).collect();
        keys.sort_unstable();
        keys.dedup();
        keys.len() + self.dbs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && self.dbs.is_empty()
    }

    /// Past [`COARSEN_ABOVE`] keys, locks their databases whole instead (shared if every key of
    /// the database is only read, else exclusive). A table entry per key, put in and taken out,
    /// costs more than the command's own work on a huge MSET or DEL; a database lock is one entry.
    /// It keeps other commands off that database on this shard while the command runs, as Redis
    /// keeps every command waiting; other databases, and other shards' keys, stay free.
    pub fn coarsen_if_huge(&mut self) {
        if self.keys.len() <= COARSEN_ABOVE {
            return;
        }
        for (item, mode) in std::mem::take(&mut self.keys) {
            if let LockKey::Key(db, _) = item {
                self.add(LockKey::Db(db), mode);
            }
        }
        self.seen = 0;
        self.repeats = false;
    }
}

/// A lock set over more keys than this on one shard locks their databases instead
/// ([`LockSet::coarsen_if_huge`]).
pub const COARSEN_ABOVE: usize = 4096;

/// The outcome of [`LockTable::acquire`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grant {
    /// Held from now on.
    Now,
    /// Queued; the grant callback fires later.
    Queued,
}

/// One owner's holds on one item, counted per mode. The default is no holder: owner
/// [`NOBODY`] (0, asserted below) holding nothing.
#[derive(Default)]
struct Hold {
    owner: Owner,
    held: [u32; 4],
}

/// The state of one item that is held or queued for. Items with neither are not in the table.
/// Small, and free of allocations while uncontended (one holder, nobody queued): every key of a
/// pipeline that spans shards passes through here.
#[derive(Default)]
struct Item {
    /// Holds per mode, all owners together.
    held: [u32; 4],
    /// The first holder inline (owner 0: none), further ones in `more`.
    first: Hold,
    more: Vec<Hold>,
    /// Requests queued on the item, boxed: most items never have any.
    queue: Option<Box<Queue>>,
}

#[derive(Default)]
struct Queue {
    /// Queued non-re-entrant requests, by mode, in arrival order.
    waiting: [BTreeSet<LockId>; 4],
    /// Queued re-entrant requests (rare): they skip rule 2 but still count as earlier requests.
    reentrant: Vec<(LockId, LockMode)>,
}

const _: () = assert!(NOBODY == 0, "Hold::default() stands for no holder");

impl Item {
    fn holder(&self, owner: Owner) -> Option<&Hold> {
        if self.first.owner == owner && owner != NOBODY {
            return Some(&self.first);
        }
        self.more.iter().find(|h| h.owner == owner)
    }

    /// Whether an owner other than `owner` holds a mode conflicting with `mode`.
    fn held_conflicts(&self, owner: Owner, mode: LockMode) -> bool {
        let mask = CONFLICTS[mode as usize];
        let conflicting = |held: &[u32; 4], m: usize| mask & (1 << m) != 0 && held[m] > 0;
        if !(0..4).any(|m| conflicting(&self.held, m)) {
            return false;
        }
        let own = self.holder(owner).map_or([0; 4], |h| h.held);
        (0..4).any(|m| mask & (1 << m) != 0 && self.held[m] > own[m])
    }

    /// Whether an owner other than `owner` and `host` holds a mode conflicting with `mode`.
    fn held_conflicts_besides(&self, owner: Owner, host: Owner, mode: LockMode) -> bool {
        let mask = CONFLICTS[mode as usize];
        if !(0..4).any(|m| mask & (1 << m) != 0 && self.held[m] > 0) {
            return false;
        }
        let theirs = |o: Owner| self.holder(o).map_or([0; 4], |h| h.held);
        let (a, b) = (theirs(owner), theirs(host));
        (0..4).any(|m| mask & (1 << m) != 0 && self.held[m] > a[m] + b[m])
    }

    /// Whether a request queued before `before` (any queued request if None) conflicts with `mode`.
    fn queue_conflicts(&self, mode: LockMode, before: Option<LockId>) -> bool {
        let Some(q) = &self.queue else {
            return false;
        };
        let earlier = |id: LockId| before.is_none_or(|b| id < b);
        LockMode::ALL
            .iter()
            .filter(|m| mode.conflicts(**m))
            .any(|m| {
                q.waiting[*m as usize]
                    .first()
                    .is_some_and(|&id| earlier(id))
            })
            || q.reentrant
                .iter()
                .any(|&(id, m)| earlier(id) && mode.conflicts(m))
    }

    /// Whether a request of `owner` for `mode` may have this item (rules 1 and 2).
    fn allows(
        &self,
        owner: Owner,
        mode: LockMode,
        reentrant: bool,
        before: Option<LockId>,
    ) -> bool {
        !self.held_conflicts(owner, mode) && (reentrant || !self.queue_conflicts(mode, before))
    }

    fn hold(&mut self, owner: Owner, mode: LockMode) {
        let m = mode as usize;
        self.held[m] += 1;
        if self.first.owner == owner {
            self.first.held[m] += 1;
        } else if let Some(h) = self.more.iter_mut().find(|h| h.owner == owner) {
            h.held[m] += 1;
        } else {
            let mut held = [0; 4];
            held[m] = 1;
            if self.first.owner == NOBODY {
                self.first = Hold { owner, held };
            } else {
                self.more.push(Hold { owner, held });
            }
        }
    }

    fn unhold(&mut self, owner: Owner, mode: LockMode) {
        let m = mode as usize;
        if self.first.owner == owner && owner != NOBODY {
            self.first.held[m] -= 1;
            self.held[m] -= 1;
            if self.first.held == [0; 4] {
                self.first = self.more.pop().unwrap_or_default();
            }
        } else if let Some(i) = self.more.iter().position(|h| h.owner == owner) {
            let h = &mut self.more[i];
            h.held[m] -= 1;
            self.held[m] -= 1;
            if h.held == [0; 4] {
                self.more.swap_remove(i);
            }
        }
    }

    fn enqueue(&mut self, id: LockId, mode: LockMode, reentrant: bool) {
        let q = self.queue.get_or_insert_default();
        if reentrant {
            q.reentrant.push((id, mode));
        } else {
            q.waiting[mode as usize].insert(id);
        }
    }

    fn dequeue(&mut self, id: LockId, mode: LockMode, reentrant: bool) {
        let Some(q) = &mut self.queue else {
            return;
        };
        if reentrant {
            q.reentrant.retain(|&(r, _)| r != id);
        } else {
            q.waiting[mode as usize].remove(&id);
        }
        if q.reentrant.is_empty() && q.waiting.iter().all(BTreeSet::is_empty) {
            self.queue = None;
        }
    }

    /// Queued ids that may be grantable once `changed` was released here, in arrival order per
    /// mode (see [`LockTable::grant_waiters`]), then the re-entrant ones.
    fn candidates(&self, changed: LockMode, out: &mut Vec<LockId>) {
        let Some(q) = &self.queue else {
            return;
        };
        for m in LockMode::ALL {
            if !m.conflicts(changed) || self.held_conflicts(NOBODY, m) {
                continue;
            }
            for &id in &q.waiting[m as usize] {
                if self.queue_conflicts(m, Some(id)) {
                    break;
                }
                out.push(id);
            }
        }
        out.extend(q.reentrant.iter().map(|&(id, _)| id));
    }

    fn is_unused(&self) -> bool {
        self.first.owner == NOBODY && self.queue.is_none()
    }
}

struct Request {
    owner: Owner,
    /// Empty for a light request: its items are in its [`Light`].
    items: Vec<(LockKey, LockMode)>,
    /// Granted light: its keys are held through the filter, not in the table's items.
    light: bool,
    /// The owner held a lock in this table when the request arrived (rule 2 does not apply).
    reentrant: bool,
    /// `None` once granted.
    on_grant: Option<Box<dyn FnOnce()>>,
}

/// A request granted *light*: at once, on keys that no other request held or waited for in the
/// table's items. Its key holds are kept here and counted in the table's filter instead of being put
/// into the items and taken out again (the commonest request, a pipeline part's, pays a few
/// instructions per key instead of two hash-table operations); its database holds are ordinary
/// items. A light hold is the same lock as one in the items: every check consults both, and before
/// anything could queue on a key, the light holds on it are moved into the items
/// ([`LockTable::materialize`]), so the queueing and granting rules only ever see items.
struct Light {
    id: LockId,
    owner: Owner,
    items: Vec<(LockKey, LockMode)>,
}

/// Light holds counted per filter slot; the filter has this many slots.
const FILTER_SLOTS: usize = 1 << 16;
/// A request with more keys than this is not made light…
const LIGHT_MAX_KEYS: usize = 128;
/// …nor one that would take the light keys of the table past this, which bounds the scan a filter
/// hit costs.
const LIGHT_MAX_TOTAL: usize = 2048;

/// Hashes a [`LockKey`] for the items table: a key's fingerprint is already a 64-bit hash, so it
/// only needs its database mixed in (one multiply, where the generic hasher made three passes).
#[derive(Clone, Copy, Default)]
struct ItemHash;

/// The hasher [`ItemHash`] builds: takes the one `u64` that [`LockKey`]'s `Hash` writes.
#[derive(Default)]
struct ItemHasher(u64);

impl std::hash::BuildHasher for ItemHash {
    type Hasher = ItemHasher;
    fn build_hasher(&self) -> ItemHasher {
        ItemHasher(0)
    }
}

impl std::hash::Hasher for ItemHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Not reached through LockKey; kept correct for any other use.
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

impl std::hash::Hash for LockKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(match *self {
            LockKey::Key(db, fp) => key_hash(db, fp),
            // Databases in the top bits (the table's tag) and the low ones (its index) alike.
            LockKey::Db(db) => key_hash(db.wrapping_add(1), 0).rotate_left(32) ^ 0xdb,
        })
    }
}

/// The filter slot of a key item.
fn filter_slot(db: u32, fp: u64) -> usize {
    (key_hash(db, fp) >> 48) as usize
}

/// The lock table of one shard.
#[derive(Default)]
pub struct LockTable {
    items: HashMap<LockKey, Item, ItemHash>,
    /// How many of `items` are keys (not databases).
    keyed: usize,
    requests: HashMap<LockId, Request>,
    /// Granted requests per owner (owners with none are absent).
    grants: HashMap<Owner, u32>,
    /// The last id handed out.
    last_id: LockId,
    /// Granted light requests, and how many key items they hold together.
    lights: Vec<Light>,
    light_keys: usize,
    /// Light key holds per [`filter_slot`] (empty until the first light request): a key whose slot
    /// counts zero is held by no light request. No slot can overflow: at most [`LIGHT_MAX_TOTAL`]
    /// keys are held light at a time.
    filter: Vec<u16>,
    /// Tests compare the table with and without light requests.
    #[cfg(test)]
    heavy_only: bool,
}

impl LockTable {
    /// True when nothing is held or queued: the fast path for every command.
    pub fn is_idle(&self) -> bool {
        self.requests.is_empty()
    }

    /// Number of granted requests.
    pub fn granted(&self) -> usize {
        self.grants.values().map(|&n| n as usize).sum()
    }

    /// Number of queued requests.
    pub fn queued(&self) -> usize {
        self.requests.len() - self.granted()
    }

    fn holds_any(&self, owner: Owner) -> bool {
        owner != NOBODY && self.grants.contains_key(&owner)
    }

    /// May a command of `owner` (None = outside any context) touch `key` of `db` in `mode` right
    /// now, without waiting? False if another owner holds a conflicting lock on the key or on its
    /// database, or (unless `owner` holds locks here, i.e. re-enters) a conflicting request is
    /// queued on either. At most three hash lookups, no allocation.
    pub fn may_run(&self, owner: Option<Owner>, db: u32, key: &[u8], mode: Mode) -> bool {
        if self.items.is_empty() && self.light_keys == 0 {
            return true;
        }
        let owner = owner.unwrap_or(NOBODY);
        let reentrant = self.holds_any(owner);
        let allows =
            |item: Option<&Item>, m| item.is_none_or(|i| i.allows(owner, m, reentrant, None));
        let (item, m) = (LockKey::key(db, key), LockMode::of_key(mode));
        allows(self.items.get(&LockKey::Db(db)), LockMode::intent(mode))
            && allows(self.items.get(&item), m)
            && !self.light_conflicts(item, m, owner, owner)
    }

    /// [`may_run`](Self::may_run) for a command of `owner` run between the commands of `host`'s
    /// lock-context part (a parked command served right after the pipeline command that made its
    /// key ready, as Redis serves blocked clients between a pipeline's commands): `host`'s locks
    /// do not stand in the way, and neither do queued requests, as for a re-entering owner.
    pub fn may_run_between(
        &self,
        owner: Owner,
        host: Owner,
        db: u32,
        key: &[u8],
        mode: Mode,
    ) -> bool {
        if self.items.is_empty() && self.light_keys == 0 {
            return true;
        }
        let allows =
            |item: Option<&Item>, m| item.is_none_or(|i| !i.held_conflicts_besides(owner, host, m));
        let (item, m) = (LockKey::key(db, key), LockMode::of_key(mode));
        allows(self.items.get(&LockKey::Db(db)), LockMode::intent(mode))
            && allows(self.items.get(&item), m)
            && !self.light_conflicts(item, m, owner, host)
    }

    /// The same question for a whole database (`Shared` for reading all of it, `Exclusive` for
    /// writing all of it).
    pub fn may_run_db(&self, owner: Option<Owner>, db: u32, mode: Mode) -> bool {
        let owner = owner.unwrap_or(NOBODY);
        let reentrant = self.holds_any(owner);
        self.items
            .get(&LockKey::Db(db))
            .is_none_or(|i| i.allows(owner, LockMode::of_key(mode), reentrant, None))
    }

    /// The same question for everything in `set`.
    pub fn may_run_set(&self, owner: Option<Owner>, set: &LockSet) -> bool {
        if self.items.is_empty() && self.light_keys == 0 {
            return true;
        }
        let owner = owner.unwrap_or(NOBODY);
        let reentrant = self.holds_any(owner);
        set.iter().all(|(item, m)| {
            self.items
                .get(&item)
                .is_none_or(|i| i.allows(owner, m, reentrant, None))
                && !self.light_conflicts(item, m, owner, owner)
        })
    }

    /// Whether a light hold of an owner other than `a` and `b` on `item` (a key) conflicts with
    /// `mode`. A filter load when no light hold shares the key's slot; else a scan of the light
    /// requests (at most [`LIGHT_MAX_TOTAL`] keys).
    fn light_conflicts(&self, item: LockKey, mode: LockMode, a: Owner, b: Owner) -> bool {
        if !self.maybe_light(item) {
            return false;
        }
        self.lights.iter().any(|l| {
            l.owner != a
                && l.owner != b
                && l.items.iter().any(|&(i, m)| i == item && mode.conflicts(m))
        })
    }

    /// Whether any light request holds `item`, as far as the filter knows (false: certainly none).
    fn maybe_light(&self, item: LockKey) -> bool {
        match item {
            LockKey::Key(db, fp) => self.light_keys > 0 && self.filter[filter_slot(db, fp)] > 0,
            LockKey::Db(_) => false,
        }
    }

    /// The item for `item`, put in the table (holding nothing) if absent.
    fn item_mut(&mut self, item: LockKey) -> &mut Item {
        let keyed = &mut self.keyed;
        self.items.entry(item).or_insert_with(|| {
            *keyed += usize::from(matches!(item, LockKey::Key(..)));
            Item::default()
        })
    }

    /// Takes `item` out of the table (it holds nothing and nobody waits for it).
    fn forget(
        keyed: &mut usize,
        o: hashbrown::hash_map::OccupiedEntry<'_, LockKey, Item, ItemHash>,
    ) {
        *keyed -= usize::from(matches!(o.key(), LockKey::Key(..)));
        o.remove();
    }

    /// Grants `items` to `owner` light if it can be: no key in the items or held light already
    /// (as far as the filter knows), every database allowing it as in
    /// [`acquire_inner`](Self::acquire_inner), and the light bounds respected. Gives `items` back
    /// if not (nothing changed then).
    fn acquire_light(
        &mut self,
        owner: Owner,
        id: LockId,
        items: Vec<(LockKey, LockMode)>,
        reentrant: bool,
    ) -> Result<(), Vec<(LockKey, LockMode)>> {
        #[cfg(test)]
        if self.heavy_only {
            return Err(items);
        }
        let keys = items
            .iter()
            .filter(|(i, _)| matches!(i, LockKey::Key(..)))
            .count();
        if keys == 0 || keys > LIGHT_MAX_KEYS || self.light_keys + keys > LIGHT_MAX_TOTAL {
            return Err(items);
        }
        // A key some light request may hold already (its filter slot counts any) goes through the
        // items, with those holds: a key many requests share (read by every pipeline) then sits in
        // the items while it is held, rather than making every check of it scan the lights.
        let free = items.iter().all(|&(item, m)| match item {
            LockKey::Key(..) => {
                let in_items = self.keyed > 0 && self.items.contains_key(&item);
                !in_items && !self.maybe_light(item)
            }
            LockKey::Db(_) => self
                .items
                .get(&item)
                .is_none_or(|i| i.allows(owner, m, reentrant, None)),
        });
        if !free {
            return Err(items);
        }
        if self.filter.is_empty() {
            self.filter = vec![0; FILTER_SLOTS];
        }
        for &(item, m) in &items {
            match item {
                LockKey::Key(db, fp) => self.filter[filter_slot(db, fp)] += 1,
                LockKey::Db(_) => self.item_mut(item).hold(owner, m),
            }
        }
        self.light_keys += keys;
        self.lights.push(Light { id, owner, items });
        *self.grants.entry(owner).or_default() += 1;
        self.requests.insert(
            id,
            Request {
                owner,
                items: Vec::new(),
                light: true,
                reentrant,
                on_grant: None,
            },
        );
        Ok(())
    }

    /// Moves every light request holding the key `item` into the items, as the same grants: from
    /// then on it can be queued for.
    fn materialize(&mut self, item: LockKey) {
        if !self.maybe_light(item) {
            return;
        }
        let mut i = 0;
        while i < self.lights.len() {
            if !self.lights[i].items.iter().any(|&(k, _)| k == item) {
                i += 1;
                continue;
            }
            let light = self.lights.swap_remove(i);
            for &(k, m) in &light.items {
                if let LockKey::Key(db, fp) = k {
                    self.filter[filter_slot(db, fp)] -= 1;
                    self.light_keys -= 1;
                    self.item_mut(k).hold(light.owner, m);
                }
            }
            let req = self
                .requests
                .get_mut(&light.id)
                .expect("a light request is granted");
            req.items = light.items;
            req.light = false;
        }
    }

    /// Ends light request `id`'s key holds; returns its items (its databases' holds are still
    /// to be released).
    fn end_light(&mut self, id: LockId) -> Vec<(LockKey, LockMode)> {
        let at = self
            .lights
            .iter()
            .position(|l| l.id == id)
            .expect("a light request has its light");
        let light = self.lights.swap_remove(at);
        for &(k, _) in &light.items {
            if let LockKey::Key(db, fp) = k {
                self.filter[filter_slot(db, fp)] -= 1;
                self.light_keys -= 1;
            }
        }
        light.items
    }

    /// Requests `set` for `owner`. If it can be granted now it is held, [`Grant::Now`] is returned
    /// and `on_grant` is dropped; otherwise the request queues ([`Grant::Queued`]) and `on_grant`
    /// runs when it is granted (from inside a later `release` or `cancel`, so it must not touch the
    /// shard). Either way the returned id is what [`release`](Self::release) and
    /// [`cancel`](Self::cancel) take.
    pub fn acquire(
        &mut self,
        owner: Owner,
        set: LockSet,
        on_grant: Box<dyn FnOnce()>,
    ) -> (LockId, Grant) {
        self.acquire_items(owner, set.into_items(), on_grant)
    }

    /// [`acquire`](Self::acquire) for one key of `db` in `mode` (and `db` in the matching intention
    /// mode), without building a [`LockSet`].
    pub fn acquire_key(
        &mut self,
        owner: Owner,
        db: u32,
        key: &[u8],
        mode: Mode,
        on_grant: Box<dyn FnOnce()>,
    ) -> (LockId, Grant) {
        let items = vec![
            (LockKey::key(db, key), LockMode::of_key(mode)),
            (LockKey::Db(db), LockMode::intent(mode)),
        ];
        self.acquire_items(owner, items, on_grant)
    }

    /// Takes `set` for `owner` only if it can be granted at once (as [`acquire`](Self::acquire)
    /// would grant it), without queueing: None, and nothing changed, if it cannot. A request that
    /// never waits adds no edge to the wait-for graph, so it may be made on shards in any order
    /// (see `crate::multi::Optimistic`).
    pub fn try_acquire(&mut self, owner: Owner, set: LockSet) -> Option<LockId> {
        match self.acquire_inner(owner, set.into_items(), None) {
            (id, Grant::Now) => Some(id),
            (_, Grant::Queued) => None,
        }
    }

    fn acquire_items(
        &mut self,
        owner: Owner,
        items: Vec<(LockKey, LockMode)>,
        on_grant: Box<dyn FnOnce()>,
    ) -> (LockId, Grant) {
        self.acquire_inner(owner, items, Some(on_grant))
    }

    /// [`acquire_items`](Self::acquire_items); without `on_grant`, a request that cannot be granted
    /// at once is not queued (and its id not used).
    fn acquire_inner(
        &mut self,
        owner: Owner,
        items: Vec<(LockKey, LockMode)>,
        on_grant: Option<Box<dyn FnOnce()>>,
    ) -> (LockId, Grant) {
        // Every hold and grant goes through here, so this one check per request (not one per item
        // in `Item::hold`) keeps owner 0 out of the table: held by it, an item would look unused
        // (`Item::is_unused`) and be dropped with its holds.
        assert_ne!(owner, NOBODY, "owners come from new_owner()");
        self.last_id += 1;
        let id = self.last_id;
        let reentrant = self.holds_any(owner);
        let items = match self.acquire_light(owner, id, items, reentrant) {
            Ok(()) => return (id, Grant::Now),
            Err(items) => items,
        };
        // From here the request is checked, held or queued in the items only: light holds on its
        // keys move there first.
        if self.light_keys > 0 {
            for &(item, _) in &items {
                self.materialize(item);
            }
        }
        // Optimistically hold each item as it is checked (one probe per item; the items of a
        // request are distinct, so holding one never affects the check of another), and undo
        // those holds if one is refused.
        let mut held = 0;
        for &(item, m) in &items {
            match self.items.entry(item) {
                hashbrown::hash_map::Entry::Vacant(v) => {
                    self.keyed += usize::from(matches!(item, LockKey::Key(..)));
                    v.insert(Item::default()).hold(owner, m)
                }
                hashbrown::hash_map::Entry::Occupied(o) => {
                    if !o.get().allows(owner, m, reentrant, None) {
                        break;
                    }
                    o.into_mut().hold(owner, m);
                }
            }
            held += 1;
        }
        let mut request = Request {
            owner,
            items,
            light: false,
            reentrant,
            on_grant: None,
        };
        if held == request.items.len() {
            *self.grants.entry(owner).or_default() += 1;
            self.requests.insert(id, request);
            return (id, Grant::Now);
        }
        for &(item, m) in &request.items[..held] {
            if let hashbrown::hash_map::Entry::Occupied(mut o) = self.items.entry(item) {
                o.get_mut().unhold(owner, m);
                if o.get().is_unused() {
                    Self::forget(&mut self.keyed, o);
                }
            }
        }
        let Some(on_grant) = on_grant else {
            return (id, Grant::Queued);
        };
        for &(item, m) in &request.items {
            self.item_mut(item).enqueue(id, m, reentrant);
        }
        request.on_grant = Some(on_grant);
        self.requests.insert(id, request);
        (id, Grant::Queued)
    }

    /// Releases the grant `id` (one acquire's worth of holds) and grants what it was holding up.
    /// A still-queued `id` is withdrawn, as by [`cancel`](Self::cancel); an unknown one is ignored.
    pub fn release(&mut self, id: LockId) {
        self.cancel(id)
    }

    /// Undoes request `id` whatever its state: withdraws it if queued, releases it if granted
    /// (including when the grant fired but its requester is gone), and does nothing for an unknown
    /// id (already released or cancelled). Whatever it was holding up is granted.
    pub fn cancel(&mut self, id: LockId) {
        let Some(mut req) = self.requests.remove(&id) else {
            return;
        };
        if req.light {
            // Its keys are in no item, and nobody waits for them.
            req.items = self.end_light(id);
            req.items.retain(|(k, _)| matches!(k, LockKey::Db(_)));
        }
        let granted = req.on_grant.is_none();
        let mut work = Vec::new();
        for (key, mode) in req.items {
            let hashbrown::hash_map::Entry::Occupied(mut o) = self.items.entry(key) else {
                continue;
            };
            let item = o.get_mut();
            if granted {
                item.unhold(req.owner, mode);
            } else {
                item.dequeue(id, mode, req.reentrant);
            }
            if item.is_unused() {
                Self::forget(&mut self.keyed, o);
            } else if item.queue.is_some() {
                // Only a waiter can have been held up by what left.
                work.push((key, mode));
            }
        }
        if granted {
            if let Some(n) = self.grants.get_mut(&req.owner) {
                *n -= 1;
                if *n == 0 {
                    self.grants.remove(&req.owner);
                }
            }
        }
        if !work.is_empty() {
            self.grant_waiters(work);
        }
        if self.requests.is_empty() {
            self.shrink_when_idle();
        }
    }

    /// Gives back the room one huge request (an MSET of 300k keys) left in the tables once
    /// nothing is held or queued, so it does not stay allocated for good; small tables are kept,
    /// and reused without allocating.
    fn shrink_when_idle(&mut self) {
        const KEEP: usize = 1024;
        if self.items.is_empty() && self.items.capacity() > KEEP {
            self.items = HashMap::default();
        }
        if self.requests.capacity() > KEEP {
            self.requests = HashMap::new();
        }
        if self.grants.is_empty() && self.grants.capacity() > KEEP {
            self.grants = HashMap::new();
        }
        if self.lights.capacity() > KEEP {
            self.lights = Vec::new();
        }
    }

    /// Hands the grant `id` over to owner `to`: from now on `to` holds what it held, with nothing
    /// released in between (so nothing queued for its items gets them meanwhile). For a move
    /// across shards that passes its key straight to the next move of a chain (see
    /// `strata_server::moving`). False if `id` is not granted.
    pub fn hand_over(&mut self, id: LockId, to: Owner) -> bool {
        assert_ne!(to, NOBODY, "owners come from new_owner()");
        let Some(req) = self.requests.get_mut(&id) else {
            return false;
        };
        if req.on_grant.is_some() {
            return false;
        }
        let from = std::mem::replace(&mut req.owner, to);
        if from == to {
            return true;
        }
        let light = req.light;
        let items: &[(LockKey, LockMode)] = if light {
            let light = self
                .lights
                .iter_mut()
                .find(|l| l.id == id)
                .expect("a light request has its light");
            light.owner = to;
            &light.items
        } else {
            &req.items
        };
        // A light request's keys are held through its light, now `to`'s: only its databases' holds
        // move in the items.
        for &(item, m) in items {
            if light && matches!(item, LockKey::Key(..)) {
                continue;
            }
            if let Some(state) = self.items.get_mut(&item) {
                state.unhold(from, m);
                state.hold(to, m);
            }
        }
        if let Some(n) = self.grants.get_mut(&from) {
            *n -= 1;
            if *n == 0 {
                self.grants.remove(&from);
            }
        }
        *self.grants.entry(to).or_default() += 1;
        true
    }

    fn hold(&mut self, req: &Request) {
        for &(item, m) in &req.items {
            self.item_mut(item).hold(req.owner, m);
        }
        *self.grants.entry(req.owner).or_default() += 1;
    }

    /// Whether queued request `id` may be granted now.
    fn grantable(&self, id: LockId) -> bool {
        let Some(req) = self.requests.get(&id) else {
            return false;
        };
        req.on_grant.is_some()
            && req.items.iter().all(|(item, m)| {
                self.items
                    .get(item)
                    .is_none_or(|i| i.allows(req.owner, *m, req.reentrant, Some(id)))
            })
    }

    /// Grants every queued request that the changes to `work`'s items made grantable.
    ///
    /// A queued request can only become grantable through a change to one of its items (a hold
    /// released, an earlier request leaving the queue), so scanning the changed items finds them
    /// all. On one item, candidates of mode `m` are the queued requests of that mode before the
    /// first conflicting one (later ones are blocked by rule 2), unless a conflicting hold exists
    /// (then none are), plus the few re-entrant ones.
    ///
    /// Each changed item comes with the mode that changed on it (a hold of that mode released, or a
    /// queued request of that mode gone): only waiters of a conflicting mode can have been held up
    /// by it, so only they are candidates. (Without this, releasing one IX on a database would
    /// re-examine every request queued there in IX, all of whose other items are unchanged.)
    fn grant_waiters(&mut self, mut work: Vec<(LockKey, LockMode)>) {
        let mut callbacks = Vec::new();
        let mut candidates = Vec::new();
        while let Some((key, changed)) = work.pop() {
            let Some(item) = self.items.get(&key) else {
                continue;
            };
            candidates.clear();
            item.candidates(changed, &mut candidates);
            for &id in &candidates {
                if !self.grantable(id) {
                    continue;
                }
                let Some(mut req) = self.requests.remove(&id) else {
                    continue;
                };
                for (item, m) in &req.items {
                    if let Some(state) = self.items.get_mut(item) {
                        state.dequeue(id, *m, req.reentrant);
                        // Leaving the queue may unblock later requests on this item, if any.
                        if state.queue.is_some() {
                            work.push((*item, *m));
                        }
                    }
                }
                self.hold(&req);
                callbacks.extend(req.on_grant.take());
                self.requests.insert(id, req);
            }
        }
        for f in callbacks {
            f();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    fn key(k: &str) -> &[u8] {
        k.as_bytes()
    }

    fn keys(db: u32, ks: &[(&str, Mode)]) -> LockSet {
        let mut set = LockSet::new();
        for (k, m) in ks {
            set.add_key(db, key(k), *m);
        }
        set
    }

    fn db_lock(db: u32, mode: Mode) -> LockSet {
        let mut set = LockSet::new();
        set.add_db(db, mode);
        set
    }

    /// A grant log: `flag(log, n)` is a callback that records `n`.
    type Log = Rc<RefCell<Vec<u32>>>;

    fn flag(log: &Log, n: u32) -> Box<dyn FnOnce()> {
        let log = log.clone();
        Box::new(move || log.borrow_mut().push(n))
    }

    fn none() -> Box<dyn FnOnce()> {
        Box::new(|| {})
    }

    const X: Mode = Mode::Exclusive;
    const S: Mode = Mode::Shared;

    #[test]
    fn exclusive_waits_then_is_granted_in_fifo_order() {
        let mut t = LockTable::default();
        let log = Log::default();
        let a = keys(0, &[("a", X)]);
        let (first, g) = t.acquire(new_owner(), a.clone(), none());
        assert_eq!(g, Grant::Now);
        let mut ids = vec![first];
        for i in 0..3 {
            let (id, g) = t.acquire(new_owner(), a.clone(), flag(&log, i));
            assert_eq!(g, Grant::Queued);
            ids.push(id);
        }
        assert!(!t.may_run(None, 0, b"a", S));
        for i in 0..3 {
            t.release(ids[i as usize]);
            assert_eq!(*log.borrow(), (0..=i).collect::<Vec<_>>());
        }
        t.release(ids[3]);
        assert!(t.is_idle());
    }

    #[test]
    fn a_huge_set_locks_its_databases_whole_and_leaves_other_databases_free() {
        let mut set = LockSet::new();
        for i in 0..=COARSEN_ABOVE {
            set.add_key(1, format!("k{i}").as_bytes(), S);
        }
        set.add_key(2, b"w", X);
        set.coarsen_if_huge();
        assert_eq!(set.mode_of(&LockKey::Db(1)), Some(LockMode::Shared));
        assert_eq!(set.mode_of(&LockKey::Db(2)), Some(LockMode::Exclusive));
        assert_eq!(set.len(), 2, "no key of its own is left");
        let mut one = keys(1, &[("a", X)]);
        one.coarsen_if_huge();
        assert_eq!(
            one.len(),
            2,
            "a small set keeps its keys (and their intention lock)"
        );

        let mut t = LockTable::default();
        let (id, g) = t.acquire(new_owner(), set, none());
        assert_eq!(g, Grant::Now);
        // Reads of db 1 go on, a write waits; db 2 waits whole; db 3 is free.
        assert!(t.may_run(None, 1, b"k7", S));
        assert!(!t.may_run(None, 1, b"anything", X));
        assert!(!t.may_run(None, 2, b"other", S));
        assert!(t.may_run(None, 3, b"w", X));
        let log = Log::default();
        let (_, g) = t.acquire(new_owner(), keys(1, &[("k1", X)]), flag(&log, 1));
        assert_eq!(g, Grant::Queued);
        t.release(id);
        assert_eq!(*log.borrow(), vec![1]);
    }

    #[test]
    fn a_command_between_a_hosts_commands_ignores_only_the_hosts_locks() {
        let mut t = LockTable::default();
        let (host, guest, other) = (new_owner(), new_owner(), new_owner());
        let (_, g) = t.acquire(host, keys(0, &[("a", X)]), none());
        assert_eq!(g, Grant::Now);
        // Someone queued behind the host does not keep the guest waiting either.
        let (_, g) = t.acquire(other, keys(0, &[("a", X)]), none());
        assert_eq!(g, Grant::Queued);
        assert!(!t.may_run(Some(guest), 0, key("a"), Mode::Exclusive));
        assert!(t.may_run_between(guest, host, 0, key("a"), Mode::Exclusive));
        // Another owner's lock still stands in the way.
        let (_, g) = t.acquire(other, keys(0, &[("b", S)]), none());
        assert_eq!(g, Grant::Now);
        assert!(t.may_run_between(guest, host, 0, key("b"), Mode::Shared));
        assert!(!t.may_run_between(guest, host, 0, key("b"), Mode::Exclusive));
        assert!(t.may_run_between(guest, host, 0, key("c"), Mode::Exclusive));
    }

    #[test]
    fn shared_holders_coexist_and_db_lock_excludes_keys() {
        let mut t = LockTable::default();
        let log = Log::default();
        let r = keys(0, &[("a", S)]);
        let (r1, g1) = t.acquire(new_owner(), r.clone(), none());
        let (r2, g2) = t.acquire(new_owner(), r.clone(), none());
        assert_eq!((g1, g2), (Grant::Now, Grant::Now));
        let (flush, g) = t.acquire(new_owner(), db_lock(0, X), flag(&log, 1));
        assert_eq!(g, Grant::Queued);
        t.release(r1);
        assert!(log.borrow().is_empty());
        t.release(r2);
        assert_eq!(*log.borrow(), vec![1]);
        t.release(flush);
        assert!(t.is_idle());
    }

    #[test]
    fn duplicate_keys_take_strongest_mode_once() {
        let set = keys(3, &[("a", S), ("a", X), ("b", S)]);
        assert_eq!(set.len(), 3);
        assert_eq!(
            set.mode_of(&LockKey::key(3, key("a"))),
            Some(LockMode::Exclusive)
        );
        assert_eq!(
            set.mode_of(&LockKey::key(3, key("b"))),
            Some(LockMode::Shared)
        );
        assert_eq!(
            set.mode_of(&LockKey::Db(3)),
            Some(LockMode::IntentExclusive)
        );
        let mut both = db_lock(3, S);
        both.extend(keys(3, &[("a", X)]));
        assert_eq!(both.mode_of(&LockKey::Db(3)), Some(LockMode::Exclusive));
    }

    #[test]
    fn a_set_hands_the_table_each_item_once_whatever_the_order_and_repeats() {
        // Small and large sets, repeats near and far apart (the filter, the scan and the sort).
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        for n in [1usize, 5, 15, 16, 17, 40, 300] {
            let mut set = LockSet::new();
            let mut want: HashMap<LockKey, LockMode> = HashMap::new();
            for _ in 0..3 * n {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let k = LockKey::key(1, format!("k{}", rng % n as u64).as_bytes());
                let m = if rng.is_multiple_of(3) { X } else { S };
                set.add_key(1, format!("k{}", rng % n as u64).as_bytes(), m);
                let mode = LockMode::of_key(m);
                want.entry(k)
                    .and_modify(|w| *w = w.join(mode))
                    .or_insert(mode);
            }
            let items = set.into_items();
            let keys: Vec<_> = items
                .iter()
                .filter(|(k, _)| matches!(k, LockKey::Key(..)))
                .collect();
            assert_eq!(keys.len(), want.len(), "n={n}: each key once");
            for (k, m) in keys {
                assert_eq!(want.get(k), Some(m), "n={n}: the strongest mode asked for");
            }
        }
    }

    #[test]
    fn huge_lock_set_is_deduplicated_by_hashing() {
        // Quadratic deduplication would take minutes here.
        let mut set = LockSet::new();
        for round in 0..2 {
            for i in 0..100_000u32 {
                let mode = if round == 1 && i % 2 == 0 { X } else { S };
                set.add_key(0, i.to_string().as_bytes(), mode);
            }
        }
        assert_eq!(set.len(), 100_001);
        assert_eq!(
            set.mode_of(&LockKey::key(0, key("10"))),
            Some(LockMode::Exclusive)
        );
        assert_eq!(
            set.mode_of(&LockKey::key(0, key("11"))),
            Some(LockMode::Shared)
        );
        let mut t = LockTable::default();
        let (id, g) = t.acquire(new_owner(), set.clone(), none());
        assert_eq!(g, Grant::Now);
        let (id2, g) = t.acquire(new_owner(), set, none());
        assert_eq!(g, Grant::Queued);
        t.release(id);
        t.release(id2);
        assert!(t.is_idle());
    }

    #[test]
    fn a_waiting_key_request_does_not_hold_up_other_keys_of_its_db() {
        let mut t = LockTable::default();
        let log = Log::default();
        let (hold_a, _) = t.acquire(new_owner(), keys(0, &[("a", X)]), none());
        let (wait_a, g) = t.acquire(new_owner(), keys(0, &[("a", X)]), flag(&log, 1));
        assert_eq!(g, Grant::Queued);
        // Key b of the same db: neither the waiter on a nor the db lock's queue holds it up.
        assert!(t.may_run(None, 0, b"b", X));
        assert!(t.may_run(None, 0, b"b", S));
        let (b, g) = t.acquire(new_owner(), keys(0, &[("b", X), ("c", S)]), none());
        assert_eq!(g, Grant::Now);
        assert!(!t.may_run(None, 0, b"a", S));
        assert!(!t.may_run(None, 0, b"b", S));
        t.release(hold_a);
        assert_eq!(*log.borrow(), vec![1]);
        for id in [wait_a, b] {
            t.release(id);
        }
        assert!(t.is_idle());
    }

    #[test]
    fn db_exclusive_waits_for_key_holders_and_later_key_requests_wait_behind_it() {
        let mut t = LockTable::default();
        let log = Log::default();
        let (a, _) = t.acquire(new_owner(), keys(0, &[("a", S)]), none());
        let (flush, g) = t.acquire(new_owner(), db_lock(0, X), flag(&log, 1));
        assert_eq!(g, Grant::Queued);
        // Later requests in db 0 queue behind the flush, even on unrelated keys and reads.
        assert!(!t.may_run(None, 0, b"b", S));
        assert!(!t.may_run(None, 0, b"a", S));
        let (later, g) = t.acquire(new_owner(), keys(0, &[("b", S)]), flag(&log, 2));
        assert_eq!(g, Grant::Queued);
        // Other databases are unaffected.
        assert!(t.may_run(None, 1, b"a", X));
        let (other, g) = t.acquire(new_owner(), keys(1, &[("a", X)]), none());
        assert_eq!(g, Grant::Now);
        // KEYS (db shared) waits too, behind the flush.
        let (scan, g) = t.acquire(new_owner(), db_lock(0, S), flag(&log, 3));
        assert_eq!(g, Grant::Queued);
        t.release(a);
        assert_eq!(*log.borrow(), vec![1]);
        t.release(flush);
        let mut got = log.borrow().clone();
        got.sort();
        assert_eq!(got, vec![1, 2, 3]);
        for id in [later, other, scan] {
            t.release(id);
        }
        assert!(t.is_idle());
    }

    #[test]
    fn cancel_withdraws_releases_and_ignores_unknown_ids() {
        let mut t = LockTable::default();
        let log = Log::default();
        let (hold, _) = t.acquire(new_owner(), keys(0, &[("a", S)]), none());
        // A writer of a waits for the reader; a later reader of a and b waits behind the writer.
        let (writer, g) = t.acquire(new_owner(), keys(0, &[("a", X)]), flag(&log, 1));
        assert_eq!(g, Grant::Queued);
        let (reader, g) = t.acquire(new_owner(), keys(0, &[("a", S), ("b", S)]), flag(&log, 2));
        assert_eq!(g, Grant::Queued);
        // Withdrawing the writer grants the reader it was holding up, and never grants the writer.
        t.cancel(writer);
        assert_eq!(*log.borrow(), vec![2]);
        t.cancel(writer);
        t.cancel(9999);
        t.release(hold);
        assert_eq!(*log.borrow(), vec![2]);
        // Cancel after the grant fired releases: a new writer then gets the key.
        t.cancel(reader);
        let (w2, g) = t.acquire(new_owner(), keys(0, &[("a", X)]), none());
        assert_eq!(g, Grant::Now);
        t.release(w2);
        assert!(t.is_idle());
    }

    #[test]
    fn release_is_per_grant() {
        let mut t = LockTable::default();
        let owner = new_owner();
        let (r1, _) = t.acquire(owner, keys(0, &[("a", S)]), none());
        let (r2, g) = t.acquire(owner, keys(0, &[("a", S)]), none());
        assert_eq!(g, Grant::Now);
        assert_ne!(r1, r2);
        assert!(!t.may_run(None, 0, b"a", X));
        t.release(r1);
        // The second grant of the same owner still holds.
        assert!(!t.may_run(None, 0, b"a", X));
        t.release(r1);
        assert!(!t.may_run(None, 0, b"a", X));
        t.release(r2);
        assert!(t.may_run(None, 0, b"a", X));
        assert!(t.is_idle());
    }

    #[test]
    fn an_owner_reenters_its_own_locks_and_others_do_not() {
        let mut t = LockTable::default();
        let log = Log::default();
        let (tx, other) = (new_owner(), new_owner());
        let (held, _) = t.acquire(tx, keys(0, &[("a", X)]), none());
        // Someone else queues for a.
        let (waiter, g) = t.acquire(other, keys(0, &[("a", S)]), flag(&log, 1));
        assert_eq!(g, Grant::Queued);
        assert!(t.may_run(Some(tx), 0, b"a", X));
        assert!(t.may_run(Some(tx), 0, b"a", S));
        assert!(!t.may_run(Some(other), 0, b"a", S));
        assert!(!t.may_run(None, 0, b"a", S));
        // Re-entry is granted at once despite the queued waiter (waiting would deadlock).
        let (again, g) = t.acquire(tx, keys(0, &[("a", X)]), none());
        assert_eq!(g, Grant::Now);
        t.release(held);
        assert!(log.borrow().is_empty());
        t.release(again);
        assert_eq!(*log.borrow(), vec![1]);
        t.release(waiter);
        assert!(t.is_idle());
    }

    #[test]
    fn a_queued_reentrant_upgrade_waits_only_for_other_holders_and_later_requests_wait_for_it() {
        let mut t = LockTable::default();
        let log = Log::default();
        let (tx, reader) = (new_owner(), new_owner());
        let (mine, _) = t.acquire(tx, keys(0, &[("a", S)]), none());
        let (theirs, _) = t.acquire(reader, keys(0, &[("a", S)]), none());
        // A writer from outside queues first; the owner's upgrade queues after it but skips it.
        let (outsider, g) = t.acquire(new_owner(), keys(0, &[("a", X)]), flag(&log, 1));
        assert_eq!(g, Grant::Queued);
        let (upgrade, g) = t.acquire(tx, keys(0, &[("a", X)]), flag(&log, 2));
        assert_eq!(g, Grant::Queued);
        // A later reader waits behind both.
        let (late, g) = t.acquire(new_owner(), keys(0, &[("a", S)]), flag(&log, 3));
        assert_eq!(g, Grant::Queued);
        t.release(theirs);
        assert_eq!(*log.borrow(), vec![2]);
        t.release(upgrade);
        t.release(mine);
        assert_eq!(*log.borrow(), vec![2, 1]);
        t.release(outsider);
        assert_eq!(*log.borrow(), vec![2, 1, 3]);
        t.release(late);
        assert!(t.is_idle());
    }

    #[test]
    fn db_exclusive_owner_reenters_keys_of_its_db() {
        let mut t = LockTable::default();
        let tx = new_owner();
        let (db, _) = t.acquire(tx, db_lock(0, X), none());
        assert!(t.may_run(Some(tx), 0, b"k", X));
        assert!(!t.may_run(None, 0, b"k", S));
        assert!(!t.may_run_db(None, 0, S));
        assert!(t.may_run_db(Some(tx), 0, S));
        let (k, g) = t.acquire(tx, keys(0, &[("k", X)]), none());
        assert_eq!(g, Grant::Now);
        t.release(k);
        t.release(db);
        assert!(t.is_idle());
    }

    #[test]
    fn try_acquire_grants_only_what_acquire_would_grant_at_once_and_never_queues() {
        let mut t = LockTable::default();
        let (a, b, c) = (new_owner(), new_owner(), new_owner());
        let ra = t
            .try_acquire(a, keys(0, &[("k", S), ("j", S)]))
            .expect("free");
        // Shared with shared: granted; exclusive against a holder: refused, nothing left behind.
        let rb = t.try_acquire(b, keys(0, &[("k", S)])).expect("shared");
        assert_eq!(t.try_acquire(c, keys(0, &[("x", X), ("k", X)])), None);
        assert!(
            t.may_run(Some(c), 0, key("x"), X),
            "a refused request holds nothing"
        );
        assert_eq!(t.queued(), 0);
        // Behind a queued exclusive request, a shared one is refused too (rule 2).
        let log: Log = Rc::default();
        let (q, g) = t.acquire(c, keys(0, &[("k", X)]), flag(&log, 1));
        assert_eq!(g, Grant::Queued);
        assert_eq!(t.try_acquire(new_owner(), keys(0, &[("k", S)])), None);
        t.release(ra);
        t.release(rb);
        assert_eq!(*log.borrow(), vec![1]);
        t.release(q);
        assert!(t.is_idle());
    }

    #[test]
    fn a_grant_handed_over_is_held_by_its_new_owner_without_a_gap() {
        let mut t = LockTable::default();
        let (a, b, c) = (new_owner(), new_owner(), new_owner());
        let (id, g) = t.acquire(a, keys(0, &[("k", X)]), none());
        assert_eq!(g, Grant::Now);
        let log: Log = Rc::default();
        let (queued, g) = t.acquire(c, keys(0, &[("k", X)]), flag(&log, 1));
        assert_eq!(g, Grant::Queued);
        assert!(t.hand_over(id, b));
        assert!(
            log.borrow().is_empty(),
            "the queued request got nothing in between"
        );
        assert!(t.may_run(Some(b), 0, key("k"), X));
        assert!(!t.may_run(Some(a), 0, key("k"), X));
        assert!(
            !t.hand_over(queued, a),
            "a queued request holds nothing to hand over"
        );
        t.release(id);
        assert_eq!(*log.borrow(), vec![1]);
        t.release(queued);
        assert!(t.is_idle());
    }

    #[test]
    #[should_panic(expected = "owners come from new_owner()")]
    fn owner_zero_is_refused() {
        let mut t = LockTable::default();
        t.acquire_key(NOBODY, 0, b"k", X, none());
    }

    /// The table's bookkeeping agrees with its requests: every item is held or waited for, holds
    /// counted in the items are exactly those of the granted requests (a light request's databases
    /// only), a key held light is held by that one request and is in no item (so nobody waits for
    /// it), and `keyed` counts the key items.
    fn check_table(t: &LockTable) {
        let mut want: HashMap<LockKey, [u32; 4]> = HashMap::new();
        let granted = t.requests.values().filter(|r| r.on_grant.is_none());
        let items = granted.flat_map(|r| r.items.iter());
        let light_dbs = t.lights.iter().flat_map(|l| l.items.iter());
        for &(k, m) in items.chain(light_dbs.filter(|(k, _)| matches!(k, LockKey::Db(_)))) {
            want.entry(k).or_default()[m as usize] += 1;
        }
        for (k, item) in &t.items {
            assert!(!item.is_unused(), "{k:?} is in the table for nothing");
            let w = want.get(k).copied().unwrap_or_default();
            assert_eq!(item.held, w, "holds of {k:?}");
        }
        let mut light = HashMap::new();
        for l in &t.lights {
            assert_eq!(
                t.requests.get(&l.id).map(|r| (r.owner, r.light)),
                Some((l.owner, true))
            );
            for (k, _) in l
                .items
                .iter()
                .filter(|(k, _)| matches!(k, LockKey::Key(..)))
            {
                // So nobody waits for it, and its holds are counted in one place.
                assert!(
                    !t.items.contains_key(k),
                    "{k:?} is held light and in the items"
                );
                assert!(
                    light.insert(*k, l.id).is_none(),
                    "{k:?} is held light twice"
                );
            }
        }
        let keyed = t
            .items
            .keys()
            .filter(|k| matches!(k, LockKey::Key(..)))
            .count();
        assert_eq!(t.keyed, keyed);
        let light_keys = t.lights.iter().flat_map(|l| l.items.iter());
        let light_keys = light_keys.filter(|(k, _)| matches!(k, LockKey::Key(..)));
        assert_eq!(t.light_keys, light_keys.count());
    }

    /// Random requests, releases, cancels, hand-overs and `may_run` questions on a few keys of two
    /// databases: every queued request is eventually granted once everything else is released,
    /// holds never conflict, and the table ends idle. Returns what happened (grants, answers), so
    /// that runs with and without light requests can be compared.
    fn random_run(seed: u64, heavy_only: bool, rounds: usize, keyspace: u64) -> Vec<u64> {
        let mut rng = seed;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut t = LockTable {
            heavy_only,
            ..LockTable::default()
        };
        let mut trace = Vec::new();
        let granted: Rc<RefCell<Vec<LockId>>> = Rc::default();
        let mut live: Vec<(LockId, LockSet)> = Vec::new();
        let mut held: Vec<(LockId, LockSet)> = Vec::new();
        // Owners are numbered per run (not new_owner()), so both runs use the same ones.
        let mut owners = 1_000_000u64;
        // Requests granted light, and light requests moved into the items by a conflict.
        let (mut light, mut moved) = (0, 0);
        for _ in 0..rounds {
            match next(17) {
                0..=5 => {
                    let mut set = LockSet::new();
                    match next(24) {
                        0 => set.add_db(next(2) as u32, if next(2) == 0 { S } else { X }),
                        _ => {
                            for _ in 0..1 + next(3) {
                                let k = format!("k{}", next(keyspace));
                                set.add_key(
                                    next(2) as u32,
                                    k.as_bytes(),
                                    if next(2) == 0 { S } else { X },
                                );
                            }
                        }
                    }
                    let g = granted.clone();
                    let cell: Rc<RefCell<LockId>> = Rc::default();
                    let c = cell.clone();
                    let lights_before = t.lights.len();
                    owners += 1;
                    let (id, grant) = t.acquire(
                        owners,
                        set.clone(),
                        Box::new(move || g.borrow_mut().push(*c.borrow())),
                    );
                    *cell.borrow_mut() = id;
                    light += usize::from(t.lights.iter().any(|l| l.id == id));
                    moved += lights_before.saturating_sub(t.lights.len());
                    trace.push(id * 2 + u64::from(grant == Grant::Now));
                    if grant == Grant::Now {
                        held.push((id, set));
                    } else {
                        live.push((id, set));
                    }
                }
                6 | 7 => {
                    let k = format!("k{}", next(keyspace));
                    let (db, mode) = (next(2) as u32, if next(2) == 0 { S } else { X });
                    let owner = held.first().map(|(id, _)| *id);
                    trace.push(u64::from(t.may_run(None, db, k.as_bytes(), mode)));
                    let by = owner.and_then(|id| t.requests.get(&id).map(|r| r.owner));
                    trace.push(u64::from(t.may_run(by, db, k.as_bytes(), mode)));
                    if let Some(host) = by {
                        let between = t.may_run_between(owners + 1, host, db, k.as_bytes(), mode);
                        trace.push(u64::from(between));
                    }
                    let mut set = LockSet::new();
                    set.add_key(db, k.as_bytes(), mode);
                    set.add_key(db, format!("k{}", next(keyspace)).as_bytes(), S);
                    trace.push(u64::from(t.may_run_set(by, &set)));
                }
                16 => {
                    let mut set = LockSet::new();
                    for _ in 0..1 + next(3) {
                        let k = format!("k{}", next(keyspace));
                        set.add_key(0, k.as_bytes(), if next(2) == 0 { S } else { X });
                    }
                    owners += 1;
                    let got = t.try_acquire(owners, set.clone());
                    trace.push(got.map_or(0, |id| id * 2 + 1));
                    if let Some(id) = got {
                        held.push((id, set));
                    }
                }
                8 => {
                    if !held.is_empty() {
                        let (id, _) = &held[next(held.len() as u64) as usize];
                        owners += 1;
                        trace.push(u64::from(t.hand_over(*id, owners)));
                    }
                }
                _ => {
                    let pool = if next(4) > 0 { &mut held } else { &mut live };
                    if !pool.is_empty() {
                        let (id, _) = pool.swap_remove(next(pool.len() as u64) as usize);
                        t.cancel(id);
                    }
                }
            }
            for id in granted.borrow_mut().drain(..) {
                trace.push(id * 2 + 1);
                if let Some(p) = live.iter().position(|(l, _)| *l == id) {
                    held.push(live.swap_remove(p));
                }
            }
            // Holds of different owners never conflict.
            for (i, (_, a)) in held.iter().enumerate() {
                for (_, b) in &held[i + 1..] {
                    for (item, ma) in a.iter() {
                        if let Some(mb) = b.mode_of(&item) {
                            assert!(!ma.conflicts(mb), "{item:?} held {ma:?} and {mb:?}");
                        }
                    }
                }
            }
            // Nothing grantable is left waiting.
            for (id, _) in &live {
                assert!(!t.grantable(*id), "request {id} is grantable but waits");
            }
            if held.is_empty() {
                assert!(live.is_empty(), "{} requests wait for nobody", live.len());
            }
            check_table(&t);
        }
        while let Some((id, _)) = held.pop() {
            t.release(id);
            for id in granted.borrow_mut().drain(..) {
                trace.push(id * 2 + 1);
                if let Some(p) = live.iter().position(|(l, _)| *l == id) {
                    held.push(live.swap_remove(p));
                }
            }
        }
        assert!(live.is_empty());
        assert!(t.is_idle());
        assert!(t.items.is_empty() && t.grants.is_empty() && t.keyed == 0);
        assert!(t.lights.is_empty() && t.light_keys == 0);
        assert!(t.filter.iter().all(|&c| c == 0));
        if !heavy_only && keyspace > 4 {
            assert!(
                light > rounds / 8 && moved > rounds / 200,
                "{light} light, {moved} moved"
            );
        }
        trace
    }

    #[test]
    fn random_requests_never_conflict_and_always_drain() {
        let rounds = if cfg!(miri) { 300 } else { 8_000 };
        for seed in [0x1234_5678_9abc_def0u64, 0x0fed_cba9_8765_4321, 42] {
            random_run(seed, false, rounds, 4);
            random_run(seed, false, rounds, 24);
        }
    }

    /// Light requests are only a cheaper way to hold the same locks: every grant, queueing and
    /// answer is the same as with every hold in the items.
    #[test]
    fn light_holds_grant_exactly_what_held_items_grant() {
        let rounds = if cfg!(miri) { 300 } else { 8_000 };
        for seed in [7u64, 0x1234_5678_9abc_def0, 0xdead_beef_cafe_f00d, 99] {
            for keyspace in [4, 24] {
                assert_eq!(
                    random_run(seed, false, rounds, keyspace),
                    random_run(seed, true, rounds, keyspace),
                    "seed {seed}, {keyspace} keys"
                );
            }
        }
    }

    /// A light request's keys stay out of the items until someone else wants one of them.
    #[test]
    fn uncontended_requests_stay_light_and_a_conflict_moves_them_into_the_items() {
        let mut t = LockTable::default();
        let log = Log::default();
        let a = new_owner();
        let (ia, g) = t.acquire(a, keys(0, &[("x", X), ("y", S)]), none());
        assert_eq!(g, Grant::Now);
        assert_eq!((t.lights.len(), t.light_keys, t.keyed), (1, 2, 0));
        // The database's intention lock is an item; the keys are not.
        assert!(t.items.contains_key(&LockKey::Db(0)) && t.items.len() == 1);
        assert!(!t.may_run(None, 0, key("x"), S) && !t.may_run(None, 0, key("y"), X));
        assert!(t.may_run(None, 0, key("y"), S) && t.may_run(Some(a), 0, key("x"), X));
        assert!(t.may_run(None, 1, key("x"), X), "another database's x");
        // A light request for z is light too.
        let (iz, g) = t.acquire(new_owner(), keys(0, &[("z", X)]), none());
        assert_eq!((g, t.lights.len(), t.light_keys), (Grant::Now, 2, 3));
        // A second reader of y shares it: granted, through the items, where the first reader's
        // holds move too (x and y); z stays light.
        let (ib, g) = t.acquire(new_owner(), keys(0, &[("y", S)]), none());
        assert_eq!(
            (g, t.lights.len(), t.light_keys, t.keyed),
            (Grant::Now, 1, 1, 2)
        );
        // A writer of y waits for both readers.
        let (ic, g) = t.acquire(new_owner(), keys(0, &[("y", X)]), flag(&log, 3));
        assert_eq!(g, Grant::Queued);
        t.release(iz);
        assert!(t.lights.is_empty() && t.light_keys == 0);
        t.release(ib);
        assert!(log.borrow().is_empty());
        t.release(ia);
        assert_eq!(*log.borrow(), vec![3]);
        t.release(ic);
        assert!(t.is_idle() && t.items.is_empty() && t.keyed == 0);
    }
}
