//! A list (Redis's t_list.c and quicklist.c): a deque of packed nodes.
//!
//! A [`List`] is a `VecDeque` of nodes; a node is one byte buffer holding a run of consecutive
//! elements, packed, plus its element count. Pushing or popping at either end touches only the end
//! node (O(1) apart from moving the bytes of that one bounded node), and reaching index `i` walks the
//! node counts from the nearer end, then the entries of one node — as Redis's quicklist does.
//!
//! Redis 7.0 reports every list as `quicklist` (the one-node listpack encoding came in 7.2), so
//! [`List::encoding`] always does too; the node layout is not observable through commands.
//!
//! # Entry format
//! Each element is `header payload backlen`:
//! * `header` (first byte): `0xxxxxxx` an integer 0..=127 (no payload); `10llllll` a string of
//!   0..=63 bytes; `110vvvvv vvvvvvvv` a 13-bit signed integer; `1110llll llllllll` a string of up
//!   to 4095 bytes; `0xF0` + u32 length: a longer string; `0xF1`/`0xF2`/`0xF3`/`0xF4` + 2/3/4/8
//!   bytes: a little-endian signed integer.
//! * `backlen`: the size of header + payload, 7 bits per byte, read right to left (the rightmost
//!   byte holds the lowest bits; a set top bit means another byte lies to its left), so the entry
//!   before any offset can be found without scanning the node from its start.
//!
//! An element is stored as an integer exactly when it is a canonical decimal integer
//! ([`crate::num::parse_i64`]), so it reads back byte-identical and "10" never equals "010".
//!
//! # Invariants
//! * No node is empty; `len` is the sum of the node counts.
//! * A node grows past `list-max-listpack-size` (entries when positive, bytes 4 KiB..64 KiB when
//!   negative; at most 8 KiB in the positive case, as Redis's safety limit) only when it holds a
//!   single element; a write that overfills a node splits it. The limit is read at write time.
//! * An element at least [`set_packed_threshold`] bytes long (1 GiB unless DEBUG
//!   QUICKLIST-PACKED-THRESHOLD changed it) lives alone in a "plain" node, as in Redis, and no other
//!   element joins such a node.
//! * `heap` is the sum of the node buffers' capacities, kept up to date by every write, so
//!   [`List::heap_size`] is O(1).
//! * Compression (`list-compress-depth` d > 0, as of the list's creation): the d nodes at each end
//!   are stored raw, every node between them compressed with [`crate::lzf`] — unless it is under 48
//!   bytes or compression would not save 8 (then it stays raw until its bytes change), as Redis.
//!   Every write restores this ([`List::settle`]): the node it edits is decompressed first, and
//!   nodes crossing the depth boundary are (de)compressed. Reads never change the list: a read
//!   that reaches a compressed node walks a decompressed copy, and its string elements come out
//!   as [`Elem::Shared`] slices of that copy.

use std::collections::VecDeque;
use std::num::NonZeroU32;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

use crate::limits::{LIST_COMPRESS_DEPTH, LIST_MAX_LISTPACK_SIZE};
use crate::num::parse_i64;

/// Either end of a list (LEFT is the head, index 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Left,
    Right,
}

/// One element as stored: bytes, or an integer that reads back as its decimal form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Elem<'a> {
    Bytes(&'a [u8]),
    Int(i64),
    /// Bytes of a compressed node, read from the node's decompressed copy.
    Shared(Bytes),
}

impl Elem<'_> {
    /// The element's bytes.
    pub fn to_vec(self) -> Vec<u8> {
        match self {
            Elem::Bytes(b) => b.to_vec(),
            Elem::Int(i) => i.to_string().into_bytes(),
            Elem::Shared(b) => b.to_vec(),
        }
    }

    /// True if the element equals `needle`'s value.
    pub fn matches(self, needle: &Needle<'_>) -> bool {
        match self {
            Elem::Bytes(b) => b == needle.bytes,
            Elem::Int(i) => needle.int == Some(i),
            Elem::Shared(b) => b == needle.bytes,
        }
    }
}

/// An element decoded from `buf` (a compressed node's decompressed copy), owning its bytes.
fn shared(buf: &Bytes, e: Elem<'_>) -> Elem<'static> {
    match e {
        Elem::Bytes(b) => Elem::Shared(buf.slice_ref(b)),
        Elem::Int(i) => Elem::Int(i),
        Elem::Shared(b) => Elem::Shared(b),
    }
}

/// A value to compare elements with (LREM, LPOS, LINSERT's pivot), its integer form parsed once.
#[derive(Clone, Copy, Debug)]
pub struct Needle<'a> {
    bytes: &'a [u8],
    int: Option<i64>,
}

impl<'a> Needle<'a> {
    pub fn new(bytes: &'a [u8]) -> Needle<'a> {
        Needle {
            bytes,
            int: parse_i64(bytes),
        }
    }
}

/// Elements at least this long get a node of their own (Redis's `packed_threshold`).
static PACKED_THRESHOLD: AtomicU64 = AtomicU64::new(1 << 30);

/// The size from which an element gets a node of its own (see [`set_packed_threshold`]).
pub fn packed_threshold() -> u64 {
    PACKED_THRESHOLD.load(Ordering::Relaxed)
}

/// Sets the size from which an element gets a node of its own (DEBUG
/// QUICKLIST-PACKED-THRESHOLD); 0 restores the default of 1 GiB. False (changing nothing) for
/// sizes beyond 4 GiB - 1 MiB, as Redis refuses them.
pub fn set_packed_threshold(bytes: u64) -> bool {
    if bytes > (1 << 32) - (1 << 20) {
        return false;
    }
    let bytes = if bytes == 0 { 1 << 30 } else { bytes };
    PACKED_THRESHOLD.store(bytes, Ordering::Relaxed);
    true
}

fn is_large(v: &[u8]) -> bool {
    v.len() as u64 >= PACKED_THRESHOLD.load(Ordering::Relaxed)
}

// ===== entry codec =====

/// The bytes of one encoded element: header (and integer) bytes, the string payload, the backlen.
struct Enc<'a> {
    head: [u8; 9],
    head_len: usize,
    payload: &'a [u8],
    back: [u8; 5],
    back_len: usize,
}

fn backlen_size(n: usize) -> usize {
    match n {
        0..=0x7F => 1,
        0x80..=0x3FFF => 2,
        0x4000..=0x1F_FFFF => 3,
        0x20_0000..=0xFFF_FFFF => 4,
        _ => 5,
    }
}

impl<'a> Enc<'a> {
    fn new(v: &'a [u8]) -> Enc<'a> {
        let mut head = [0u8; 9];
        let (head_len, payload): (usize, &[u8]) = match parse_i64(v) {
            Some(i @ 0..=127) => {
                head[0] = i as u8;
                (1, &[])
            }
            Some(i @ -4096..=4095) => {
                let u = (i as u16) & 0x1FFF;
                head[0] = 0xC0 | (u >> 8) as u8;
                head[1] = u as u8;
                (2, &[])
            }
            Some(i) => {
                let (tag, n) = if i16::try_from(i).is_ok() {
                    (0xF1, 2)
                } else if (-(1 << 23)..(1 << 23)).contains(&i) {
                    (0xF2, 3)
                } else if i32::try_from(i).is_ok() {
                    (0xF3, 4)
                } else {
                    (0xF4, 8)
                };
                head[0] = tag;
                head[1..1 + n].copy_from_slice(&i.to_le_bytes()[..n]);
                (1 + n, &[])
            }
            None if v.len() < 64 => {
                head[0] = 0x80 | v.len() as u8;
                (1, v)
            }
            None if v.len() < 4096 => {
                head[0] = 0xE0 | (v.len() >> 8) as u8;
                head[1] = v.len() as u8;
                (2, v)
            }
            None => {
                head[0] = 0xF0;
                // Elements are bulk strings, at most 512 MB (proto-max-bulk-len), so u32 holds it.
                head[1..5].copy_from_slice(&(v.len() as u32).to_le_bytes());
                (5, v)
            }
        };
        let n = head_len + payload.len();
        let back_len = backlen_size(n);
        let mut back = [0u8; 5];
        for (k, b) in back[..back_len].iter_mut().rev().enumerate() {
            let more = if k + 1 < back_len { 0x80 } else { 0 };
            *b = ((n >> (7 * k)) & 0x7F) as u8 | more;
        }
        Enc {
            head,
            head_len,
            payload,
            back,
            back_len,
        }
    }

    fn len(&self) -> usize {
        self.head_len + self.payload.len() + self.back_len
    }

    fn write(&self, dst: &mut [u8]) {
        let (h, p) = (self.head_len, self.payload.len());
        dst[..h].copy_from_slice(&self.head[..h]);
        dst[h..h + p].copy_from_slice(self.payload);
        dst[h + p..].copy_from_slice(&self.back[..self.back_len]);
    }
}

/// Decodes the entry at `p`: the element and the entry's total size.
fn decode(buf: &[u8], p: usize) -> (Elem<'_>, usize) {
    let h = buf[p];
    let int_le = |n: usize| {
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(&buf[p + 1..p + 1 + n]);
        // Sign-extend from n bytes.
        let shift = 64 - 8 * n as u32;
        (i64::from_le_bytes(b) << shift) >> shift
    };
    let (elem, n) = match h {
        0x00..=0x7F => (Elem::Int(i64::from(h)), 1),
        0x80..=0xBF => {
            let l = usize::from(h & 0x3F);
            (Elem::Bytes(&buf[p + 1..p + 1 + l]), 1 + l)
        }
        0xC0..=0xDF => {
            let u = (u16::from(h & 0x1F) << 8) | u16::from(buf[p + 1]);
            (Elem::Int(i64::from(((u << 3) as i16) >> 3)), 2)
        }
        0xE0..=0xEF => {
            let l = (usize::from(h & 0x0F) << 8) | usize::from(buf[p + 1]);
            (Elem::Bytes(&buf[p + 2..p + 2 + l]), 2 + l)
        }
        0xF0 => {
            let mut b = [0u8; 4];
            b.copy_from_slice(&buf[p + 1..p + 5]);
            let l = u32::from_le_bytes(b) as usize;
            (Elem::Bytes(&buf[p + 5..p + 5 + l]), 5 + l)
        }
        0xF1 => (Elem::Int(int_le(2)), 3),
        0xF2 => (Elem::Int(int_le(3)), 4),
        0xF3 => (Elem::Int(int_le(4)), 5),
        _ => (Elem::Int(int_le(8)), 9),
    };
    (elem, n + backlen_size(n))
}

/// The start of the entry that ends at `end`.
fn prev_start(buf: &[u8], end: usize) -> usize {
    let (mut n, mut k, mut q) = (0usize, 0, end);
    loop {
        q -= 1;
        let b = buf[q];
        n |= usize::from(b & 0x7F) << (7 * k);
        k += 1;
        if b & 0x80 == 0 {
            break;
        }
    }
    q - n
}

// ===== nodes =====

/// A node's bytes: the entries are `v[front..]`, and the `front` bytes before them are room for
/// elements pushed at the head, as the spare capacity after them is for elements pushed at the
/// tail. A push or pop at either end then moves no entry: Redis's listpack nodes move their whole
/// content for every push or pop at the head (up to 8 KiB per LPUSH or LPOP with the default
/// node size). When an end runs out of room, the entries move once within the allocation if it
/// has enough spare in all, half of the spare left at the other end (a queue, LPUSH then RPOP,
/// turns what its pops free into room for its pushes; pushes alternating between the ends move
/// the entries once per half of the room); else the node grows by an eighth at least, at the end
/// pushed to, so a node filled from either end is copied O(log n) times. An edit inside the node
/// moves the bytes after it, as a listpack does.
///
/// While the node is compressed, `v` holds the compressed form instead (with no room), and
/// `zipped` the entries' byte length (at least 48, so the option takes no more than the length:
/// with the head room's offset beside it, the buffer is a `Vec` and 8 bytes, and a node 40).
#[derive(Debug, Default)]
struct NodeBuf {
    v: Vec<u8>,
    front: u32,
    zipped: Option<NonZeroU32>,
}

impl From<Vec<u8>> for NodeBuf {
    fn from(v: Vec<u8>) -> NodeBuf {
        NodeBuf {
            v,
            front: 0,
            zipped: None,
        }
    }
}

impl Clone for NodeBuf {
    /// The bytes alone, with no room at either end.
    fn clone(&self) -> NodeBuf {
        NodeBuf {
            zipped: self.zipped,
            ..NodeBuf::from(self.to_vec())
        }
    }
}

impl std::ops::Deref for NodeBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.v[self.front as usize..]
    }
}

impl std::ops::DerefMut for NodeBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.v[self.front as usize..]
    }
}

impl NodeBuf {
    /// Bytes allocated, room at both ends included.
    fn capacity(&self) -> usize {
        self.v.capacity()
    }

    /// Room after the entries.
    fn room_back(&self) -> usize {
        self.v.capacity() - self.v.len()
    }

    /// Makes room for `need` bytes after the entries: from the room before them when the
    /// allocation has enough in all (moving the entries once), else `need + extra` more bytes of
    /// allocation.
    fn reserve_back(&mut self, need: usize, extra: impl FnOnce() -> usize) {
        if self.room_back() >= need {
            return;
        }
        let room = self.v.capacity() - self.len();
        if room >= need {
            // Half of what is spare stays before the entries: pushes that alternate between the
            // ends move the entries once per half of the room, not at every push.
            self.place((room - need) / 2);
        } else {
            self.v.reserve_exact(need + extra());
        }
    }

    /// Makes room for `need` bytes before the entries: from the room after them when the
    /// allocation has enough in all (moving the entries once), else a new allocation with
    /// `need + extra` bytes before them.
    fn reserve_front(&mut self, need: usize, extra: impl FnOnce() -> usize) {
        let front = self.front as usize;
        if front >= need {
            return;
        }
        let live = self.len();
        let room = self.v.capacity() - live;
        if room >= need {
            self.place(need + (room - need) / 2);
            return;
        }
        let room = need + extra();
        let mut v = Vec::with_capacity(room + live);
        v.resize(room, 0);
        v.extend_from_slice(&self.v[front..]);
        self.v = v;
        // Head pushes go into nodes within the size limit (64 KiB at most), so the room fits.
        self.front = u32::try_from(room).expect("room within a node's size limit");
    }

    /// Moves the entries to start at `at`, within the allocation (`at + len <= capacity`).
    fn place(&mut self, at: usize) {
        let (f, live) = (self.front as usize, self.len());
        if at + live > self.v.len() {
            self.v.resize(at + live, 0);
        }
        self.v.copy_within(f..f + live, at);
        self.v.truncate(at + live);
        self.front = u32::try_from(at).expect("room within a node's size limit");
    }

    /// Replaces the entries' bytes `start..end` with the encoded element.
    fn replace(&mut self, start: usize, end: usize, enc: &Enc<'_>) {
        let (new, old, len, f) = (enc.len(), end - start, self.len(), self.front as usize);
        if start == len {
            // Appending (RPUSH): nothing to move, and no zero-fill of the new bytes.
            self.v.reserve_exact(new);
            self.v.extend_from_slice(&enc.head[..enc.head_len]);
            self.v.extend_from_slice(enc.payload);
            self.v.extend_from_slice(&enc.back[..enc.back_len]);
            return;
        }
        if start == 0 && end == 0 && f >= new {
            // At the head, into the room there (LPUSH).
            enc.write(&mut self.v[f - new..f]);
            self.front = (f - new) as u32;
            return;
        }
        if new > old {
            let grow = new - old;
            // Exact growth: the allocator rounds to its size class and grows in place within it,
            // so a node's buffer stays close to its contents (Redis's listpacks do the same).
            self.v.reserve_exact(grow);
            self.v.resize(f + len + grow, 0);
            self.v.copy_within(f + end..f + len, f + end + grow);
        } else if new < old {
            self.v.copy_within(f + end..f + len, f + start + new);
            self.v.truncate(f + len - (old - new));
        }
        enc.write(&mut self.v[f + start..f + start + new]);
    }

    /// Removes the entries' bytes in `range`: at the head by giving them to the room there.
    fn remove(&mut self, range: Range<usize>) {
        let (f, len) = (self.front as usize, self.len());
        if range.start == 0 && range.end == len {
            self.clear();
        } else if range.start == 0 && u32::try_from(f + range.end).is_ok() {
            self.front = (f + range.end) as u32;
        } else {
            self.v.drain(f + range.start..f + range.end);
        }
    }

    /// Splits off the entries' bytes from `at` on.
    fn split_off(&mut self, at: usize) -> Vec<u8> {
        self.v.split_off(self.front as usize + at)
    }

    fn clear(&mut self) {
        self.v.clear();
        self.front = 0;
        self.zipped = None;
    }

    /// Drops the room at both ends.
    fn shrink_to_fit(&mut self) {
        if self.front != 0 {
            self.v.drain(..self.front as usize);
            self.front = 0;
        }
        self.v.shrink_to_fit();
    }

    /// Makes the entries `len` zero bytes, exactly allocated, for the caller to overwrite.
    fn reset_to(&mut self, len: usize) {
        self.clear();
        self.v.reserve_exact(len);
        self.v.resize(len, 0);
    }

    fn extend_from_slice(&mut self, bytes: &[u8]) {
        self.v.extend_from_slice(bytes);
    }
}

#[derive(Clone, Debug, Default)]
struct Node {
    /// The entries, or while the node is compressed, their compressed form.
    buf: NodeBuf,
    count: u32,
    /// Holds one large element that no other element may join.
    plain: bool,
    /// Compression was tried on these exact bytes and did not pay (cleared by every change).
    incompressible: bool,
}

// The node sits in every list's deque: room at the head cost it no size.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Node>() == 40);

/// Nodes smaller than this are never compressed, and compression must save at least
/// `MIN_COMPRESS_IMPROVE` bytes (Redis's MIN_COMPRESS_BYTES and MIN_COMPRESS_IMPROVE).
const MIN_COMPRESS_BYTES: usize = 48;
const MIN_COMPRESS_IMPROVE: usize = 8;

/// The start offset of entry `k` (< count) of a node's entries, walking from the nearer end.
fn offset_in(buf: &[u8], count: usize, k: usize) -> usize {
    if k <= count / 2 {
        let mut p = 0;
        for _ in 0..k {
            p += decode(buf, p).1;
        }
        p
    } else {
        let mut p = buf.len();
        for _ in k..count {
            p = prev_start(buf, p);
        }
        p
    }
}

impl Node {
    /// The start offset of entry `k` (< count) of an uncompressed node.
    fn offset_of(&self, k: usize) -> usize {
        debug_assert!(self.buf.zipped.is_none());
        offset_in(&self.buf, self.count as usize, k)
    }

    /// Byte length of the entries.
    fn raw_len(&self) -> usize {
        self.buf.zipped.map_or(self.buf.len(), |l| l.get() as usize)
    }

    /// A decompressed copy of a compressed node's entries (None when it is not compressed): what
    /// reads walk, so that a read never changes the list.
    fn unzipped(&self) -> Option<Bytes> {
        let len = self.buf.zipped?.get() as usize;
        let raw = crate::lzf::decompress(&self.buf, len).expect("a node compressed by `zip`");
        Some(Bytes::from(raw))
    }

    /// Stores the node uncompressed.
    fn unzip(&mut self) {
        if let Some(raw) = self.unzipped() {
            self.buf = NodeBuf::from(Vec::from(raw));
            self.buf.zipped = None;
        }
    }

    /// Stores the node compressed, if that saves enough (as Redis's __quicklistCompressNode).
    fn zip(&mut self) {
        let len = self.buf.len();
        if self.buf.zipped.is_some() || self.incompressible || len < MIN_COMPRESS_BYTES {
            return;
        }
        match crate::lzf::compress(&self.buf, len - MIN_COMPRESS_IMPROVE - 1) {
            Some(c) => {
                self.buf = NodeBuf::from(c);
                self.buf.shrink_to_fit();
                self.buf.zipped = NonZeroU32::new(len as u32);
            }
            None => self.incompressible = true,
        }
    }

    /// Releases spare capacity left by removals (kept while modest, so pops do not reallocate).
    fn trim_capacity(&mut self) {
        if self.buf.capacity() > 64 && self.buf.capacity() > 2 * self.buf.len() {
            self.buf.shrink_to_fit();
        }
    }
}

/// Bytes a node may hold under a negative `list-max-listpack-size`, and the 8 KiB safety limit
/// that also bounds nodes sized by entry count (Redis's SIZE_SAFETY_LIMIT).
const SIZE_CLASSES: [usize; 5] = [4096, 8192, 16384, 32768, 65536];
const SAFETY_LIMIT: usize = 8192;

/// True if a node of `bytes` bytes and `count` entries respects `list-max-listpack-size`.
fn fits(bytes: usize, count: usize) -> bool {
    let fill = LIST_MAX_LISTPACK_SIZE.get();
    if fill >= 0 {
        count <= fill.max(1) as usize && bytes <= SAFETY_LIMIT
    } else {
        let class = ((-fill) as usize).min(SIZE_CLASSES.len()) - 1;
        bytes <= SIZE_CLASSES[class]
    }
}

// ===== the list =====
/// One node of a list as [`List::node_layout`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeLayout {
    /// Elements in the node.
    pub count: usize,
    /// Bytes of the node's packed entries (uncompressed).
    pub bytes: usize,
    /// Bytes stored while the node is compressed (None: stored raw).
    pub compressed_bytes: Option<usize>,
    /// A node holding one element at least the packed threshold long (Redis's PLAIN container).
    pub plain: bool,
}

/// A list; see the module docs.
#[derive(Debug)]
pub struct List {
    nodes: VecDeque<Node>,
    len: usize,
    /// Sum of the node buffers' capacities.
    heap: usize,
    /// `list-compress-depth` when the list was created (Redis fixes it per list the same way).
    depth: u32,
}

impl Default for List {
    fn default() -> List {
        List {
            nodes: VecDeque::new(),
            len: 0,
            heap: 0,
            depth: LIST_COMPRESS_DEPTH.count().min(u16::MAX as usize) as u32,
        }
    }
}

impl Clone for List {
    fn clone(&self) -> List {
        // Cloned buffers have capacity == length, so the byte count is recomputed.
        let mut nodes = VecDeque::with_capacity(self.nodes.len());
        nodes.extend(self.nodes.iter().cloned());
        let heap = nodes.iter().map(|n| n.buf.capacity()).sum();
        List {
            nodes,
            len: self.len,
            heap,
            depth: self.depth,
        }
    }
}

impl PartialEq for List {
    /// Equal when the elements are, whatever the node layout.
    fn eq(&self, other: &List) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl Eq for List {}

impl List {
    /// An empty list, compressed as `list-compress-depth` says now.
    pub fn new() -> List {
        List::default()
    }

    /// An empty list keeping `depth` raw nodes at each end and compressing those between (0: none).
    pub fn with_compress_depth(depth: u32) -> List {
        List {
            depth,
            ..List::default()
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are no elements (the key is then deleted by the write that emptied it).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The encoding OBJECT ENCODING reports: always `quicklist`, as in Redis 7.0.
    pub fn encoding(&self) -> &'static str {
        "quicklist"
    }

    /// `list-compress-depth` as fixed for this list: raw nodes kept at each end (0: none compressed).
    pub fn compress_depth(&self) -> u32 {
        self.depth
    }

    /// The layout of each node, head first (DEBUG QUICKLIST): what Redis's quicklistRepr shows.
    pub fn node_layout(&self) -> impl Iterator<Item = NodeLayout> + '_ {
        self.nodes.iter().map(|n| NodeLayout {
            count: n.count as usize,
            bytes: n.raw_len(),
            compressed_bytes: n.buf.zipped.map(|_| n.buf.len()),
            plain: n.plain,
        })
    }

    /// Heap bytes owned (approximate, O(1)).
    pub fn heap_size(&self) -> usize {
        self.heap + self.nodes.capacity() * std::mem::size_of::<Node>()
    }

    /// Runs `f` on node `i` (uncompressed first), keeping the byte count right; removes the node
    /// if `f` emptied it.
    fn edit<R>(&mut self, i: usize, f: impl FnOnce(&mut Node) -> R) -> R {
        self.unzip_node(i);
        let node = &mut self.nodes[i];
        node.incompressible = false;
        let before = node.buf.capacity();
        let r = f(node);
        let after = node.buf.capacity();
        let empty = node.count == 0;
        self.heap = self.heap + after - before;
        if empty {
            self.heap -= after;
            self.nodes.remove(i);
            self.shrink_nodes();
        }
        r
    }

    /// Stores node `i` uncompressed, keeping the byte count right.
    fn unzip_node(&mut self, i: usize) {
        let n = &mut self.nodes[i];
        if n.buf.zipped.is_some() {
            let before = n.buf.capacity();
            n.unzip();
            self.heap = self.heap + n.buf.capacity() - before;
        }
    }

    /// Restores the compression invariant after a write: with depth d, the d nodes at each end
    /// are stored raw and every node between them compressed (when that pays). Writes change the
    /// node sequence only locally, so checking the d + 1 nodes at each end (where nodes cross the
    /// boundary as nodes come and go) plus the `touched` ones suffices.
    fn settle(&mut self, touched: Range<usize>) {
        let depth = self.depth as usize;
        let n = self.nodes.len();
        if depth == 0 {
            return;
        }
        let head = 0..(depth + 1).min(n);
        let tail = n.saturating_sub(depth + 1)..n;
        let touched = touched.start.min(n)..touched.end.min(n);
        for i in head.chain(tail).chain(touched) {
            if i >= depth && i + depth < n {
                let node = &mut self.nodes[i];
                let before = node.buf.capacity();
                node.zip();
                self.heap = self.heap + node.buf.capacity() - before;
            } else {
                self.unzip_node(i);
            }
        }
    }

    /// Makes room for one more node, growing the deque by a quarter rather than doubling (most
    /// lists have one or two nodes, and the deque is part of every list's footprint).
    fn reserve_node(&mut self) {
        if self.nodes.len() == self.nodes.capacity() {
            self.nodes.reserve_exact((self.nodes.capacity() / 4).max(1));
        }
    }

    fn shrink_nodes(&mut self) {
        if self.nodes.capacity() > 4 && self.nodes.capacity() > 2 * self.nodes.len() {
            self.nodes.shrink_to_fit();
        }
    }

    /// Inserts a new node holding just `enc` at position `i`, with room for `extra` more bytes at
    /// the end `grows` (where the pushes that follow go).
    fn insert_node(&mut self, i: usize, enc: &Enc<'_>, plain: bool, extra: usize, grows: End) {
        let mut v = Vec::with_capacity(enc.len() + extra);
        let front = if grows == End::Left { extra } else { 0 };
        v.resize(front + enc.len(), 0);
        enc.write(&mut v[front..]);
        let buf = NodeBuf {
            v,
            front: u32::try_from(front).expect("room ahead within a node's size limit"),
            zipped: None,
        };
        self.heap += buf.capacity();
        self.reserve_node();
        self.nodes.insert(
            i,
            Node {
                buf,
                count: 1,
                plain,
                incompressible: false,
            },
        );
    }

    /// Splits node `i` before its entry `k`, so that entry starts a node; returns that node's
    /// position (`i` itself when `k` is 0).
    fn split_at(&mut self, i: usize, k: usize) -> usize {
        if k == 0 {
            return i;
        }
        self.unzip_node(i);
        let n = &self.nodes[i];
        let moved = n.count as usize - k;
        let at = n.offset_of(k);
        let tail = self.edit(i, |n| {
            let tail = n.buf.split_off(at);
            n.buf.shrink_to_fit();
            n.count = k as u32;
            tail
        });
        self.heap += tail.capacity();
        self.reserve_node();
        self.nodes.insert(
            i + 1,
            Node {
                buf: NodeBuf::from(tail),
                count: moved as u32,
                plain: false,
                incompressible: false,
            },
        );
        i + 1
    }

    /// Adds `v` at `end`.
    pub fn push(&mut self, end: End, v: &[u8]) {
        self.push_ahead(end, v, &Enc::new(v), 0)
    }

    /// Adds every element of `elems` at `end`, one after the other (so pushing a, b, c on the
    /// left leaves c first). The nodes being filled are sized for what is still to come, so a
    /// long push does not reallocate a node at every element.
    pub fn push_all<V: AsRef<[u8]>>(&mut self, end: End, elems: &[V]) {
        if let [v] = elems {
            // One element (the common LPUSH/RPUSH): nothing is still to come.
            return self.push(end, v.as_ref());
        }
        let mut ahead: usize = elems.iter().map(|v| Enc::new(v.as_ref()).len()).sum();
        for v in elems {
            let v = v.as_ref();
            let enc = Enc::new(v);
            ahead -= enc.len();
            self.push_ahead(end, v, &enc, ahead);
        }
    }

    /// Bytes a node may be given in advance for `ahead` more bytes of elements: only under a
    /// byte limit (a count limit may close the node sooner), never past the limit.
    fn reserve_for(len: usize, ahead: usize) -> usize {
        let fill = LIST_MAX_LISTPACK_SIZE.get();
        if fill >= 0 || ahead == 0 {
            return 0;
        }
        let class = ((-fill) as usize).min(SIZE_CLASSES.len()) - 1;
        ahead.min(SIZE_CLASSES[class].saturating_sub(len))
    }

    /// [`List::push`] of `v` encoded as `enc`, with `ahead` bytes of elements still to be pushed
    /// after this one.
    fn push_ahead(&mut self, end: End, v: &[u8], enc: &Enc<'_>, ahead: usize) {
        let large = is_large(v);
        self.len += 1;
        let (i, room) = match (end, self.nodes.front(), self.nodes.back()) {
            _ if large => (0, false),
            (End::Left, Some(n), _) | (End::Right, _, Some(n)) if n.plain => (0, false),
            (End::Left, Some(n), _) => (0, fits(n.raw_len() + enc.len(), n.count as usize + 1)),
            (End::Right, _, Some(n)) => (
                self.nodes.len() - 1,
                fits(n.raw_len() + enc.len(), n.count as usize + 1),
            ),
            _ => (0, false),
        };
        if room {
            self.edit(i, |n| {
                // Room at the end pushed to grows by an eighth of the node at least, so a node
                // filled one push at a time is reallocated O(log) times rather than at every
                // push, with no more slack than the allocator's own size classes leave (tiny
                // nodes still grow exactly, keeping small lists as compact as before). Worked
                // out only when the node must grow.
                let len = n.buf.len();
                let extra = || Self::reserve_for(len + enc.len(), ahead).max(len / 8);
                let at = if end == End::Left {
                    n.buf.reserve_front(enc.len(), extra);
                    0
                } else {
                    n.buf.reserve_back(enc.len(), extra);
                    n.buf.len()
                };
                n.buf.replace(at, at, enc);
                n.count += 1;
            });
        } else {
            let at = if end == End::Left {
                0
            } else {
                self.nodes.len()
            };
            let extra = if large {
                0
            } else {
                Self::reserve_for(enc.len(), ahead)
            };
            self.insert_node(at, enc, large, extra, end);
        }
        self.settle(0..0);
    }

    /// Adds `v` at the head (LPUSH).
    pub fn push_front(&mut self, v: &[u8]) {
        self.push(End::Left, v)
    }

    /// Adds `v` at the tail (RPUSH).
    pub fn push_back(&mut self, v: &[u8]) {
        self.push(End::Right, v)
    }

    /// Removes and returns the element at `end`.
    pub fn pop(&mut self, end: End) -> Option<Vec<u8>> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        let i = if end == End::Left {
            0
        } else {
            self.nodes.len() - 1
        };
        let v = self.edit(i, |n| {
            let (start, stop) = if end == End::Left {
                (0, decode(&n.buf, 0).1)
            } else {
                (prev_start(&n.buf, n.buf.len()), n.buf.len())
            };
            let v = decode(&n.buf, start).0.to_vec();
            n.buf.remove(start..stop);
            n.count -= 1;
            n.trim_capacity();
            v
        });
        self.settle(0..0);
        Some(v)
    }

    /// Removes and returns the head element (LPOP).
    pub fn pop_front(&mut self) -> Option<Vec<u8>> {
        self.pop(End::Left)
    }

    /// Removes and returns the tail element (RPOP).
    pub fn pop_back(&mut self) -> Option<Vec<u8>> {
        self.pop(End::Right)
    }

    /// The node holding element `index` (< len) and the element's position in it, walking the
    /// node counts from the nearer end.
    fn locate(&self, index: usize) -> (usize, usize) {
        if index < self.len / 2 {
            let mut k = index;
            for (i, n) in self.nodes.iter().enumerate() {
                if k < n.count as usize {
                    return (i, k);
                }
                k -= n.count as usize;
            }
        } else {
            let mut k = self.len - 1 - index;
            for (i, n) in self.nodes.iter().enumerate().rev() {
                if k < n.count as usize {
                    return (i, n.count as usize - 1 - k);
                }
                k -= n.count as usize;
            }
        }
        unreachable!("index {index} below len {} not found", self.len)
    }

    /// The element at `index` (0 = head), if any.
    pub fn get(&self, index: usize) -> Option<Elem<'_>> {
        self.iter_from(index).next()
    }

    /// Elements from `index` towards the tail.
    pub fn iter_from(&self, index: usize) -> Iter<'_> {
        if index >= self.len {
            return Iter {
                list: self,
                node: 0,
                off: 0,
                left: 0,
                cur: None,
            };
        }
        let (node, k) = self.locate(index);
        let n = &self.nodes[node];
        let cur = n.unzipped();
        let off = offset_in(cur.as_deref().unwrap_or(&n.buf), n.count as usize, k);
        Iter {
            list: self,
            node,
            off,
            left: self.len - index,
            cur,
        }
    }

    /// Every element, head to tail.
    pub fn iter(&self) -> Iter<'_> {
        self.iter_from(0)
    }

    /// Elements from `index` towards the head.
    pub fn iter_rev_from(&self, index: usize) -> RevIter<'_> {
        if index >= self.len {
            return RevIter {
                list: self,
                node: 0,
                end: 0,
                left: 0,
                cur: None,
            };
        }
        let (node, k) = self.locate(index);
        let n = &self.nodes[node];
        let cur = n.unzipped();
        let buf = cur.as_deref().unwrap_or(&n.buf);
        let start = offset_in(buf, n.count as usize, k);
        let end = start + decode(buf, start).1;
        RevIter {
            list: self,
            node,
            end,
            left: index + 1,
            cur,
        }
    }

    /// Every element, tail to head.
    pub fn iter_rev(&self) -> RevIter<'_> {
        match self.len {
            0 => self.iter_rev_from(0),
            n => self.iter_rev_from(n - 1),
        }
    }

    /// The index of the first element equal to `needle`, from the head.
    pub fn position(&self, needle: &Needle<'_>) -> Option<usize> {
        self.iter().position(|e| e.matches(needle))
    }

    /// Splits node `i` in two halves if it breaks the size limit (after an insert or a replace).
    fn split_if_needed(&mut self, i: usize) {
        let n = &self.nodes[i];
        if n.count < 2 || fits(n.raw_len(), n.count as usize) {
            return;
        }
        let keep = n.count as usize / 2;
        self.split_at(i, keep);
    }

    /// Replaces the element at `index`; false if there is none (LSET).
    pub fn set(&mut self, index: usize, v: &[u8]) -> bool {
        if index >= self.len {
            return false;
        }
        let (i, k) = self.locate(index);
        let enc = Enc::new(v);
        let large = is_large(v);
        if large || self.nodes[i].plain {
            // The element gets a node of its own (or leaves one): isolate it, then rewrite it.
            let at = self.split_at(i, k);
            if self.nodes[at].count > 1 {
                self.split_at(at, 1);
            }
            self.edit(at, |n| {
                n.buf.reset_to(enc.len());
                enc.write(&mut n.buf);
                n.plain = large;
            });
            self.settle(i..at + 2);
            return true;
        }
        self.edit(i, |n| {
            let start = n.offset_of(k);
            let end = start + decode(&n.buf, start).1;
            n.buf.replace(start, end, &enc);
        });
        self.split_if_needed(i);
        self.settle(i..i + 2);
        true
    }

    /// Inserts `v` so that it becomes element `index` (≤ len); LINSERT.
    pub fn insert(&mut self, index: usize, v: &[u8]) {
        if index == 0 {
            return self.push_front(v);
        }
        if index >= self.len {
            return self.push_back(v);
        }
        let (i, k) = self.locate(index);
        let enc = Enc::new(v);
        let large = is_large(v);
        self.len += 1;
        if large || self.nodes[i].plain {
            let at = self.split_at(i, k);
            self.insert_node(at, &enc, large, 0, End::Right);
            self.settle(i..at + 2);
            return;
        }
        self.edit(i, |n| {
            let at = n.offset_of(k);
            n.buf.replace(at, at, &enc);
            n.count += 1;
        });
        self.split_if_needed(i);
        self.settle(i..i + 2);
    }

    /// Removes `count` elements from `start` on (LTRIM); whole nodes are dropped without decoding.
    pub fn remove_range(&mut self, start: usize, count: usize) {
        let count = count.min(self.len.saturating_sub(start));
        if count == 0 {
            return;
        }
        let (mut i, k) = self.locate(start);
        self.len -= count;
        let mut left = count;
        // The first node: entries from k on.
        let take = left.min(self.nodes[i].count as usize - k);
        let emptied = self.edit(i, |n| {
            let from = n.offset_of(k);
            let to = if k + take == n.count as usize {
                n.buf.len()
            } else {
                n.offset_of(k + take)
            };
            n.buf.remove(from..to);
            n.count -= take as u32;
            n.trim_capacity();
            n.count == 0
        });
        left -= take;
        if !emptied {
            i += 1;
        }
        // Whole nodes, then the head of the last one.
        while left > 0 {
            let c = self.nodes[i].count as usize;
            let take = left.min(c);
            self.edit(i, |n| {
                let to = if take == c {
                    n.buf.len()
                } else {
                    n.offset_of(take)
                };
                n.buf.remove(0..to);
                n.count -= take as u32;
                n.trim_capacity();
            });
            left -= take;
        }
        self.settle(0..self.nodes.len());
    }

    /// Keeps only elements `start..=stop` (indices already clamped, as LTRIM computes them); an
    /// empty range empties the list.
    pub fn retain_range(&mut self, start: usize, stop: usize) {
        if start > stop || start >= self.len {
            let n = self.len;
            self.remove_range(0, n);
            return;
        }
        let stop = stop.min(self.len - 1);
        let tail = self.len - 1 - stop;
        self.remove_range(stop + 1, tail);
        self.remove_range(0, start);
    }

    /// Removes up to `limit` elements equal to `needle` (all when 0), from the head when `from` is
    /// Left, else from the tail (LREM). Returns how many were removed.
    pub fn remove_matching(&mut self, needle: &Needle<'_>, limit: usize, from: End) -> usize {
        let mut removed = 0;
        // Node indices: from the head a node that empties is removed and the next slides into
        // its place; from the tail removing node i leaves the indices below it alone.
        let mut next = match from {
            End::Left => 0,
            End::Right => self.nodes.len(),
        };
        loop {
            let i = match from {
                End::Left if next < self.nodes.len() => next,
                End::Right if next > 0 => next - 1,
                _ => break,
            };
            let before = self.nodes.len();
            if limit != 0 && removed == limit {
                break;
            }
            let want = if limit == 0 {
                usize::MAX
            } else {
                limit - removed
            };
            // Entry spans of this node that match, in the scan's direction.
            self.unzip_node(i);
            let n = &self.nodes[i];
            let mut spans = Vec::new();
            let mut p = 0;
            while p < n.buf.len() {
                let (e, size) = decode(&n.buf, p);
                if e.matches(needle) {
                    spans.push((p, p + size));
                }
                p += size;
            }
            if spans.is_empty() {
                match from {
                    End::Left => next += 1,
                    End::Right => next -= 1,
                }
                continue;
            }
            if from == End::Right {
                spans.reverse();
            }
            spans.truncate(want);
            spans.sort_unstable();
            removed += spans.len();
            self.edit(i, |n| {
                let mut kept = Vec::with_capacity(n.buf.len());
                let mut p = 0;
                for &(s, e) in &spans {
                    kept.extend_from_slice(&n.buf[p..s]);
                    p = e;
                }
                kept.extend_from_slice(&n.buf[p..]);
                n.buf = NodeBuf::from(kept);
                n.count -= spans.len() as u32;
                n.trim_capacity();
            });
            let gone = self.nodes.len() < before;
            match from {
                End::Left if !gone => next += 1,
                End::Left => {}
                End::Right => next -= 1,
            }
        }
        self.len -= removed;
        self.merge_small_nodes();
        self.settle(0..self.nodes.len());
        removed
    }

    /// Merges neighbouring nodes that fit together (after removals left them sparse).
    fn merge_small_nodes(&mut self) {
        let mut i = 0;
        while i + 1 < self.nodes.len() {
            let (a, b) = (&self.nodes[i], &self.nodes[i + 1]);
            if !a.plain && !b.plain && fits(a.raw_len() + b.raw_len(), (a.count + b.count) as usize)
            {
                self.unzip_node(i + 1);
                let b = self.nodes.remove(i + 1).expect("node i + 1 exists");
                self.heap -= b.buf.capacity();
                self.edit(i, |a| {
                    a.buf.extend_from_slice(&b.buf);
                    a.count += b.count;
                });
            } else {
                i += 1;
            }
        }
        self.shrink_nodes();
    }
}

/// Elements towards the tail; see [`List::iter_from`].
pub struct Iter<'a> {
    list: &'a List,
    node: usize,
    off: usize,
    left: usize,
    /// The current node's entries when it is compressed.
    cur: Option<Bytes>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = Elem<'a>;

    fn next(&mut self) -> Option<Elem<'a>> {
        if self.left == 0 {
            return None;
        }
        let list: &'a List = self.list;
        let mut n = &list.nodes[self.node];
        if self.off == n.raw_len() {
            self.node += 1;
            self.off = 0;
            n = &list.nodes[self.node];
            self.cur = n.unzipped();
        }
        let (e, size) = match &self.cur {
            None => decode(&n.buf, self.off),
            Some(buf) => {
                let (e, size) = decode(buf, self.off);
                (shared(buf, e), size)
            }
        };
        self.off += size;
        self.left -= 1;
        Some(e)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

/// Elements towards the head; see [`List::iter_rev_from`].
pub struct RevIter<'a> {
    list: &'a List,
    node: usize,
    /// End offset of the next entry to return, in `node`.
    end: usize,
    left: usize,
    /// The current node's entries when it is compressed.
    cur: Option<Bytes>,
}

impl<'a> Iterator for RevIter<'a> {
    type Item = Elem<'a>;

    fn next(&mut self) -> Option<Elem<'a>> {
        if self.left == 0 {
            return None;
        }
        let list: &'a List = self.list;
        if self.end == 0 {
            self.node -= 1;
            let n = &list.nodes[self.node];
            self.end = n.raw_len();
            self.cur = n.unzipped();
        }
        self.left -= 1;
        match &self.cur {
            None => {
                let buf = &list.nodes[self.node].buf;
                let start = prev_start(buf, self.end);
                self.end = start;
                Some(decode(buf, start).0)
            }
            Some(buf) => {
                let start = prev_start(buf, self.end);
                self.end = start;
                Some(shared(buf, decode(buf, start).0))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(l: &List) -> Vec<Vec<u8>> {
        l.iter().map(Elem::to_vec).collect()
    }

    /// Checks the structural invariants and that both iterators agree with `model`.
    fn check(l: &List, model: &VecDeque<Vec<u8>>) {
        assert_eq!(l.len(), model.len());
        assert!(l
            .nodes
            .iter()
            .all(|n| n.count > 0 && (!n.plain || n.count == 1)));
        assert_eq!(
            l.nodes.iter().map(|n| n.count as usize).sum::<usize>(),
            l.len
        );
        assert_eq!(
            l.heap,
            l.nodes.iter().map(|n| n.buf.capacity()).sum::<usize>()
        );
        // Compression: raw at the ends, compressed between them whenever that pays.
        let (n, d) = (l.nodes.len(), l.depth as usize);
        for (i, node) in l.nodes.iter().enumerate() {
            let inner = d > 0 && i >= d && i + d < n;
            if !inner {
                assert!(
                    node.buf.zipped.is_none(),
                    "node {i} of {n} (depth {d}) compressed"
                );
            } else if node.buf.zipped.is_none() {
                let worth = node.buf.len() >= MIN_COMPRESS_BYTES
                    && crate::lzf::compress(&node.buf, node.buf.len() - MIN_COMPRESS_IMPROVE - 1)
                        .is_some();
                assert!(!worth, "inner node {i} of {n} (depth {d}) left raw");
            }
        }
        let fwd = values(l);
        assert_eq!(fwd, model.iter().cloned().collect::<Vec<_>>());
        let mut rev: Vec<Vec<u8>> = l.iter_rev().map(Elem::to_vec).collect();
        rev.reverse();
        assert_eq!(rev, fwd);
    }

    #[test]
    fn codec_round_trips_every_kind() {
        let cases: Vec<Vec<u8>> = [
            "0",
            "127",
            "128",
            "-1",
            "-4096",
            "4095",
            "4096",
            "-32768",
            "32767",
            "40000",
            "-8388608",
            "8388607",
            "8388608",
            "2147483647",
            "-2147483648",
            "2147483648",
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775808",
            "010",
            "+1",
            "-0",
            "",
            "a",
            "1.5",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .chain([
            vec![b'x'; 63],
            vec![b'y'; 64],
            vec![b'z'; 4095],
            vec![b'w'; 4096],
        ])
        .chain([vec![b'v'; 70_000]])
        .collect();
        let mut buf = NodeBuf::default();
        for c in &cases {
            let e = Enc::new(c);
            let at = buf.len();
            buf.replace(at, at, &e);
        }
        let mut p = 0;
        let mut ends = Vec::new();
        for c in &cases {
            let (e, size) = decode(&buf, p);
            assert_eq!(&e.clone().to_vec(), c);
            assert!(e.matches(&Needle::new(c)));
            p += size;
            ends.push(p);
        }
        assert_eq!(p, buf.len());
        for (i, &end) in ends.iter().enumerate().rev() {
            let start = prev_start(&buf, end);
            assert_eq!(decode(&buf, start).0.to_vec(), cases[i]);
        }
        assert!(!Elem::Int(10).matches(&Needle::new(b"010")));
    }

    #[test]
    fn push_pop_both_ends() {
        let mut l = List::new();
        let mut m = VecDeque::new();
        for i in 0..300 {
            let v = format!("v{i}").into_bytes();
            if i % 3 == 0 {
                l.push_front(&v);
                m.push_front(v);
            } else {
                l.push_back(&v);
                m.push_back(v);
            }
        }
        check(&l, &m);
        assert_eq!(l.pop_back(), m.pop_back());
        assert_eq!(l.pop_front(), m.pop_front());
        check(&l, &m);
        while let Some(v) = m.pop_front() {
            assert_eq!(l.pop_front(), Some(v));
        }
        assert!(l.is_empty() && l.nodes.is_empty());
        assert_eq!(l.heap, 0);
    }

    /// Held by the tests that set or depend on `list-max-listpack-size` (a process-wide limit).
    static LIMIT_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// A small xorshift so the test is deterministic without a dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn random_operations_match_a_model() {
        let _limit = LIMIT_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        // Without compression, and with 1 and 2 raw nodes at each end.
        for depth in [0, 1, 2] {
            random_operations(depth);
        }
    }

    fn random_operations(depth: u32) {
        // Tiny nodes so every operation crosses node boundaries. Other tests may change the limit
        // concurrently; the list is correct under any limit, only its layout differs.
        LIST_MAX_LISTPACK_SIZE.set(3);
        // And 3 KiB elements get plain nodes of their own.
        assert!(set_packed_threshold(1000));
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut l = List::with_compress_depth(depth);
        let mut m: VecDeque<Vec<u8>> = VecDeque::new();
        // Elements of 3 KiB make nodes overflow their 8 KiB limit on LSET and LINSERT.
        let pool: Vec<Vec<u8>> = ["a", "b", "1", "-7", "300", "long-element-xxxxxxxx"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .chain([vec![b'k'; 3000]])
            .collect();
        let mut saw_plain = false;
        let mut saw_zipped = false;
        for step in 0..20_000 {
            let v = &pool[rng.next(pool.len())];
            match rng.next(9) {
                0 => {
                    l.push_front(v);
                    m.push_front(v.clone());
                }
                1 | 2 => {
                    l.push_back(v);
                    m.push_back(v.clone());
                }
                3 => assert_eq!(l.pop_front(), m.pop_front()),
                4 => assert_eq!(l.pop_back(), m.pop_back()),
                5 if !m.is_empty() => {
                    let i = rng.next(m.len());
                    assert!(l.set(i, v));
                    m[i] = v.clone();
                }
                6 => {
                    let i = rng.next(m.len() + 1);
                    l.insert(i, v);
                    m.insert(i, v.clone());
                }
                7 => {
                    let limit = rng.next(3);
                    let from = if rng.next(2) == 0 {
                        End::Left
                    } else {
                        End::Right
                    };
                    let n = l.remove_matching(&Needle::new(v), limit, from);
                    let mut removed = 0;
                    let idx: Vec<usize> = match from {
                        End::Left => (0..m.len()).collect(),
                        End::Right => (0..m.len()).rev().collect(),
                    };
                    let mut drop = vec![false; m.len()];
                    for i in idx {
                        if m[i] == *v && (limit == 0 || removed < limit) {
                            drop[i] = true;
                            removed += 1;
                        }
                    }
                    let mut k = 0;
                    m.retain(|_| {
                        k += 1;
                        !drop[k - 1]
                    });
                    assert_eq!(n, removed);
                }
                8 if !m.is_empty() => {
                    let a = rng.next(m.len());
                    let b = rng.next(m.len());
                    l.retain_range(a, b);
                    if a > b {
                        m.clear();
                    } else {
                        m.truncate(b + 1);
                        m.drain(..a);
                    }
                }
                _ => {}
            }
            if step % 97 == 0 || m.len() < 8 {
                check(&l, &m);
                saw_plain |= l.nodes.iter().any(|n| n.plain);
                saw_zipped |= l.nodes.iter().any(|n| n.buf.zipped.is_some());
                if !m.is_empty() {
                    let i = rng.next(m.len());
                    assert_eq!(l.get(i).map(Elem::to_vec).as_ref(), Some(&m[i]));
                    let r: Vec<Vec<u8>> = l.iter_rev_from(i).map(Elem::to_vec).collect();
                    let want: Vec<Vec<u8>> = m.iter().take(i + 1).rev().cloned().collect();
                    assert_eq!(r, want);
                }
            }
        }
        assert!(saw_plain);
        if depth > 0 {
            assert!(saw_zipped, "compressible nodes were compressed");
        }
        LIST_MAX_LISTPACK_SIZE.set(-2);
        assert!(set_packed_threshold(0));
        assert!(!set_packed_threshold(1 << 32));
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn compression_keeps_the_ends_raw_and_saves_memory() {
        // 8 KiB nodes (the default), which no other test changes meanwhile.
        let _limit = LIMIT_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        LIST_MAX_LISTPACK_SIZE.set(-2);
        let elems: Vec<String> = (0..20_000)
            .map(|i| format!("element-{:04}", i % 500))
            .collect();
        let mut sizes = Vec::new();
        for depth in [0, 1, 2] {
            let mut l = List::with_compress_depth(depth);
            l.push_all(End::Right, &elems);
            for i in 0..500 {
                l.push_front(format!("head-{i}").as_bytes());
                l.push_back(format!("tail-{i}").as_bytes());
            }
            let model: VecDeque<Vec<u8>> = (0..500)
                .rev()
                .map(|i| format!("head-{i}").into_bytes())
                .chain(elems.iter().map(|e| e.clone().into_bytes()))
                .chain((0..500).map(|i| format!("tail-{i}").into_bytes()))
                .collect();
            check(&l, &model);
            let c = l.clone();
            check(&c, &model);
            assert_eq!(l.get(10_000).map(Elem::to_vec), Some(model[10_000].clone()));
            let zipped = l.nodes.iter().filter(|n| n.buf.zipped.is_some()).count();
            assert_eq!(
                zipped,
                if depth == 0 {
                    0
                } else {
                    l.nodes.len() - 2 * depth as usize
                }
            );
            // Edits in the middle decompress one node and compress it again.
            assert!(l.set(9_000, b"changed"));
            l.insert(12_000, b"inserted");
            assert_eq!(
                l.get(9_000),
                Some(Elem::Shared(Bytes::from_static(b"changed")))
                    .filter(|_| depth > 0)
                    .or(l.get(9_000))
            );
            assert_eq!(l.get(12_000).map(Elem::to_vec), Some(b"inserted".to_vec()));
            assert_eq!(
                l.nodes.iter().filter(|n| n.buf.zipped.is_some()).count(),
                if depth == 0 {
                    0
                } else {
                    l.nodes.len() - 2 * depth as usize
                }
            );
            // Popping everything moves every node across the boundary and back to raw.
            let all: Vec<Vec<u8>> = l.iter().map(Elem::to_vec).collect();
            sizes.push(l.heap_size());
            let mut popped = Vec::new();
            while let Some(v) = l.pop_front() {
                popped.push(v);
                assert_eq!(
                    l.heap,
                    l.nodes.iter().map(|n| n.buf.capacity()).sum::<usize>(),
                    "depth {depth} after {} pops",
                    popped.len()
                );
            }
            assert_eq!(popped, all);
            assert_eq!(l.heap, 0);
        }
        // Repetitive elements compress well: depth 1 and 2 take far less than raw nodes.
        assert!(
            sizes[1] * 2 < sizes[0] && sizes[2] * 2 < sizes[0],
            "{sizes:?}"
        );
    }

    #[test]
    fn push_all_reserves_ahead_and_matches_single_pushes() {
        let elems: Vec<String> = (0..2000).map(|i| format!("element-{i:04}")).collect();
        for end in [End::Left, End::Right] {
            let mut one = List::new();
            for e in &elems {
                one.push(end, e.as_bytes());
            }
            let mut all = List::new();
            all.push_all(end, &elems);
            assert_eq!(one, all);
            let model: VecDeque<Vec<u8>> = one.iter().map(Elem::to_vec).collect();
            check(&all, &model);
        }
    }

    /// Pushes `v` at `end` of a one-node list and of its model; true if the entries already in
    /// the node moved to make room.
    fn push_moved(l: &mut List, model: &mut VecDeque<Vec<u8>>, end: End, v: &[u8]) -> bool {
        let before = l.nodes.front().map(|n| n.buf.as_ptr() as usize);
        l.push(end, v);
        let start = l.nodes[0].buf.as_ptr() as usize;
        let kept = match end {
            End::Left => {
                model.push_front(v.to_vec());
                start + Enc::new(v).len()
            }
            End::Right => {
                model.push_back(v.to_vec());
                start
            }
        };
        before.is_some_and(|b| b != kept)
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn head_pushes_use_room_before_the_entries() {
        let _limit = LIMIT_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        LIST_MAX_LISTPACK_SIZE.set(-2);
        // One node (7 bytes an entry, 8 KiB a node) filled from the head, one push at a time:
        // the entries already there move only when room is made (O(log n) times), not at every
        // push, and every element reads back in order.
        let mut l = List::new();
        let mut model = VecDeque::new();
        let mut moved = 0;
        for i in 0..1100 {
            let v = format!("v{i:04}");
            moved += usize::from(push_moved(&mut l, &mut model, End::Left, v.as_bytes()));
        }
        assert_eq!(l.nodes.len(), 1);
        assert!(
            moved < 60,
            "the entries moved at {moved} of 1100 head pushes"
        );
        assert!(l.nodes[0].buf.front > 0);
        check(&l, &model);
        // Edits inside a node with room at its head, and a split of it.
        assert!(l.set(5, b"five"));
        model[5] = b"five".to_vec();
        l.insert(7, b"seven");
        model.insert(7, b"seven".to_vec());
        l.remove_range(3, 2);
        model.drain(3..5);
        assert_eq!(l.remove_matching(&Needle::new(b"v1000"), 0, End::Left), 1);
        model.retain(|v| v != b"v1000");
        check(&l, &model);
        let c = l.clone();
        assert_eq!(c, l);
        assert!(c.nodes.iter().all(|n| n.buf.front == 0));
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn queues_reuse_the_room_they_free() {
        let _limit = LIMIT_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        LIST_MAX_LISTPACK_SIZE.set(-2);
        // LPUSH + RPOP and RPUSH + LPOP at a steady length: the pops' room serves the pushes, so
        // the node's allocation stays within a small multiple of its contents.
        for end in [End::Left, End::Right] {
            let other = if end == End::Left {
                End::Right
            } else {
                End::Left
            };
            let mut l = List::new();
            let mut model = VecDeque::new();
            for i in 0..100_000u32 {
                let v = format!("job-{i}");
                l.push(end, v.as_bytes());
                match end {
                    End::Left => model.push_front(v.into_bytes()),
                    End::Right => model.push_back(v.into_bytes()),
                }
                if model.len() > 200 {
                    let got = l.pop(other);
                    let want = match other {
                        End::Left => model.pop_front(),
                        End::Right => model.pop_back(),
                    };
                    assert_eq!(got, want);
                }
                if i % 9_973 == 0 {
                    check(&l, &model);
                }
                let bytes: usize = l.nodes.iter().map(|n| n.buf.len()).sum();
                assert!(
                    l.heap <= 3 * bytes + 64,
                    "{end:?} at {i}: {} for {bytes}",
                    l.heap
                );
            }
            check(&l, &model);
        }
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn pushes_alternating_between_the_ends_rarely_move_the_entries() {
        let _limit = LIMIT_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        LIST_MAX_LISTPACK_SIZE.set(-2);
        let mut l = List::new();
        let mut model = VecDeque::new();
        let mut moved = 0;
        for i in 0..1000 {
            let v = format!("v{i:04}");
            let end = if i % 2 == 0 { End::Left } else { End::Right };
            moved += usize::from(push_moved(&mut l, &mut model, end, v.as_bytes()));
        }
        assert_eq!(l.nodes.len(), 1);
        assert!(moved < 100, "the entries moved at {moved} of 1000 pushes");
        check(&l, &model);
    }

    #[test]
    fn clone_and_equality_ignore_layout() {
        let mut a = List::new();
        let mut b = List::new();
        for i in 0..50 {
            a.push_back(i.to_string().as_bytes());
            b.push_front((49 - i).to_string().as_bytes());
        }
        assert_eq!(a, b);
        let c = a.clone();
        assert_eq!(c, a);
        assert_eq!(
            c.heap,
            c.nodes.iter().map(|n| n.buf.capacity()).sum::<usize>()
        );
        b.set(3, b"x");
        assert_ne!(a, b);
    }

    #[test]
    fn node_layout_reports_counts_sizes_and_plain_nodes() {
        let mut l = List::with_compress_depth(0);
        assert_eq!(l.node_layout().count(), 0);
        for i in 0..10 {
            l.push_back(format!("e{i}").as_bytes());
        }
        let nodes: Vec<NodeLayout> = l.node_layout().collect();
        assert_eq!(nodes.iter().map(|n| n.count).sum::<usize>(), 10);
        assert!(nodes
            .iter()
            .all(|n| !n.plain && n.compressed_bytes.is_none() && n.bytes > 0));
        assert_eq!(l.compress_depth(), 0);
        // Other tests change the threshold concurrently; it is always within Redis's bounds.
        assert!((1..=(1 << 32)).contains(&packed_threshold()));
    }
}
