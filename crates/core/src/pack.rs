//! The storage of small collections: thin, exactly sized byte buffers, and a one-word pointer to
//! either such a buffer or a boxed big representation.
//!
//! A small hash, intset or sorted set is what Redis calls a listpack: one allocation holding the
//! elements packed. [`PackBuf`] is that allocation behind a thin pointer — an 8-byte header (byte
//! length, element count) followed by the bytes, resized exactly on every write as a listpack is
//! (the allocator grows it in place within its size class). [`PackOr`] is a collection's whole
//! representation in one word: the buffer's pointer, or the pointer of a `Box` of the big encoding
//! with its low bit set. So a collection key is its entry (which holds the one-word representation
//! inline, see `entry.rs`) plus, while small, one allocation.
//!
//! Invariants: a `PackBuf` never holds more than [`MAX_PACK`] bytes (callers convert to the big
//! encoding first, as Redis converts a listpack that would pass its 1 GiB safety size); the header
//! always describes the allocation (its size is `HEADER + len`). This module is the only unsafe
//! code of the small encodings; its unit tests run under Miri.

use std::alloc::{alloc, dealloc, handle_alloc_error, realloc, Layout};
use std::marker::PhantomData;
use std::ops::Range;
use std::ptr::NonNull;

/// Header bytes: the byte length (u32) and the element count (u32).
const HEADER: usize = 8;

/// The largest packed buffer (Redis's LISTPACK_MAX_SAFETY_SIZE): a write that would pass it
/// converts the collection to its big encoding instead.
pub const MAX_PACK: usize = 1 << 30;

/// A thin, exactly sized byte buffer with an element count; see the module docs.
#[repr(transparent)]
pub struct PackBuf(NonNull<u8>);

// SAFETY: a PackBuf exclusively owns its allocation, like a Box<[u8]>.
unsafe impl Send for PackBuf {}
// SAFETY: shared access only reads.
unsafe impl Sync for PackBuf {}

fn layout(len: usize) -> Layout {
    Layout::from_size_align(HEADER + len, 8).expect("pack size fits a Layout")
}

impl PackBuf {
    /// An empty buffer (one 8-byte allocation: the header).
    pub fn new() -> PackBuf {
        PackBuf::from_slice(&[], 0)
    }

    /// A buffer holding a copy of `bytes`, counting `count` elements.
    pub fn from_slice(bytes: &[u8], count: usize) -> PackBuf {
        assert!(bytes.len() <= MAX_PACK && count <= u32::MAX as usize);
        let l = layout(bytes.len());
        // SAFETY: the layout is non-zero-sized; header and bytes are written within it.
        unsafe {
            let p = alloc(l);
            if p.is_null() {
                handle_alloc_error(l);
            }
            (p as *mut u32).write(bytes.len() as u32);
            (p.add(4) as *mut u32).write(count as u32);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), p.add(HEADER), bytes.len());
            PackBuf(NonNull::new_unchecked(p))
        }
    }

    /// Byte length of the contents.
    pub fn len(&self) -> usize {
        // SAFETY: every PackBuf starts with its header.
        unsafe { (self.0.as_ptr() as *const u32).read() as usize }
    }

    /// True when there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element count the owner keeps here.
    pub fn count(&self) -> usize {
        // SAFETY: as in `len`.
        unsafe { (self.0.as_ptr().add(4) as *const u32).read() as usize }
    }

    /// Sets the element count.
    pub fn set_count(&mut self, count: usize) {
        assert!(count <= u32::MAX as usize);
        // SAFETY: as in `len`; we hold &mut self.
        unsafe { (self.0.as_ptr().add(4) as *mut u32).write(count as u32) }
    }

    /// The contents.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `len` bytes follow the header, initialised, owned by self.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().add(HEADER), self.len()) }
    }

    /// The contents, mutably (same length).
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`; we hold &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_ptr().add(HEADER), self.len()) }
    }

    /// Replaces the bytes in `range` by `with`, reallocating to the exact new size.
    pub fn splice(&mut self, range: Range<usize>, with: &[u8]) {
        let old = self.len();
        assert!(range.start <= range.end && range.end <= old);
        let new = old - range.len() + with.len();
        assert!(new <= MAX_PACK, "packed buffer past its safety size");
        let tail = old - range.end;
        // SAFETY: every copy stays within the allocation as sized at that moment: growth
        // reallocates before moving the tail right, shrinking moves it left before reallocating.
        unsafe {
            if new > old {
                self.resize_to(old, new);
            }
            let data = self.0.as_ptr().add(HEADER);
            std::ptr::copy(
                data.add(range.end),
                data.add(range.start + with.len()),
                tail,
            );
            std::ptr::copy_nonoverlapping(with.as_ptr(), data.add(range.start), with.len());
            if new < old {
                self.resize_to(old, new);
            }
            (self.0.as_ptr() as *mut u32).write(new as u32);
        }
    }

    /// Appends `with` at the end.
    pub fn push(&mut self, with: &[u8]) {
        let end = self.len();
        self.splice(end..end, with);
    }

    /// # Safety
    /// The allocation currently has room for `old` content bytes; afterwards it has `new`.
    unsafe fn resize_to(&mut self, old: usize, new: usize) {
        let l = layout(new);
        let p = realloc(self.0.as_ptr(), layout(old), l.size());
        if p.is_null() {
            handle_alloc_error(l);
        }
        self.0 = NonNull::new_unchecked(p);
    }
}

impl Default for PackBuf {
    fn default() -> Self {
        PackBuf::new()
    }
}

impl Drop for PackBuf {
    fn drop(&mut self) {
        // SAFETY: the allocation was made with `layout(len)` (kept so by every resize).
        unsafe { dealloc(self.0.as_ptr(), layout(self.len())) }
    }
}

impl Clone for PackBuf {
    fn clone(&self) -> Self {
        PackBuf::from_slice(self.bytes(), self.count())
    }
}

impl PartialEq for PackBuf {
    fn eq(&self, other: &Self) -> bool {
        self.count() == other.count() && self.bytes() == other.bytes()
    }
}

impl Eq for PackBuf {}

impl std::fmt::Debug for PackBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackBuf")
            .field("count", &self.count())
            .field("bytes", &self.bytes())
            .finish()
    }
}

/// A type that is a [`PackBuf`] with methods of its own.
///
/// # Safety
/// Implementors must be `#[repr(transparent)]` wrappers of a `PackBuf` (so a pointer to the
/// buffer's pointer is a valid pointer to the implementor).
pub unsafe trait Packed: Sized {
    /// Consumes the wrapper, returning its buffer.
    fn into_buf(self) -> PackBuf;
}

// SAFETY: trivially a wrapper of itself.
unsafe impl Packed for PackBuf {
    fn into_buf(self) -> PackBuf {
        self
    }
}

/// Which representation a [`PackOr`] holds.
pub enum Rep<P, B> {
    Pack(P),
    Big(B),
}

/// One word: a packed buffer `P`, or a boxed big representation `B` (tagged by the pointer's low
/// bit, which `B`'s alignment leaves free).
pub struct PackOr<P: Packed, B> {
    ptr: NonNull<u8>,
    _owns: PhantomData<(P, Box<B>)>,
}

// SAFETY: a PackOr owns what it points to exactly as a P or a Box<B> would.
unsafe impl<P: Packed + Send, B: Send> Send for PackOr<P, B> {}
// SAFETY: as above; shared access only reads.
unsafe impl<P: Packed + Sync, B: Sync> Sync for PackOr<P, B> {}

impl<P: Packed, B> PackOr<P, B> {
    /// Holds a packed buffer.
    pub fn pack(p: P) -> Self {
        let buf = std::mem::ManuallyDrop::new(p.into_buf());
        PackOr {
            ptr: buf.0,
            _owns: PhantomData,
        }
    }

    /// Holds a big representation.
    pub fn big(b: Box<B>) -> Self {
        const { assert!(std::mem::align_of::<B>() >= 2) };
        let raw = NonNull::new(Box::into_raw(b)).expect("a box is never null");
        PackOr {
            ptr: raw.cast::<u8>().map_addr(|a| a | 1),
            _owns: PhantomData,
        }
    }

    /// True when the big representation is held.
    pub fn is_big(&self) -> bool {
        self.ptr.addr().get() & 1 == 1
    }

    fn big_ptr(&self) -> *mut B {
        self.ptr.as_ptr().map_addr(|a| a & !1).cast::<B>()
    }

    /// The representation, borrowed.
    pub fn get(&self) -> Rep<&P, &B> {
        // SAFETY: tagged: a live Box<B> pointer; untagged: the pointer of a PackBuf, which `P`
        // wraps transparently (the `Packed` contract).
        unsafe {
            if self.is_big() {
                Rep::Big(&*self.big_ptr())
            } else {
                Rep::Pack(&*(&self.ptr as *const NonNull<u8> as *const P))
            }
        }
    }

    /// The representation, mutably (a packed buffer may reallocate: it updates the pointer here).
    pub fn get_mut(&mut self) -> Rep<&mut P, &mut B> {
        // SAFETY: as in `get`, with exclusive access.
        unsafe {
            if self.is_big() {
                Rep::Big(&mut *self.big_ptr())
            } else {
                Rep::Pack(&mut *(&mut self.ptr as *mut NonNull<u8> as *mut P))
            }
        }
    }
}

impl<P: Packed, B> Drop for PackOr<P, B> {
    fn drop(&mut self) {
        // SAFETY: as in `get`; ownership ends here.
        unsafe {
            if self.is_big() {
                drop(Box::from_raw(self.big_ptr()));
            } else {
                std::ptr::drop_in_place(&mut self.ptr as *mut NonNull<u8> as *mut P);
            }
        }
    }
}

impl<P: Packed + Clone, B: Clone> Clone for PackOr<P, B> {
    fn clone(&self) -> Self {
        match self.get() {
            Rep::Pack(p) => PackOr::pack(p.clone()),
            Rep::Big(b) => PackOr::big(Box::new(b.clone())),
        }
    }
}

impl<P: Packed + PartialEq, B: PartialEq> PartialEq for PackOr<P, B> {
    fn eq(&self, other: &Self) -> bool {
        match (self.get(), other.get()) {
            (Rep::Pack(a), Rep::Pack(b)) => a == b,
            (Rep::Big(a), Rep::Big(b)) => a == b,
            _ => false,
        }
    }
}

impl<P: Packed + Eq, B: Eq> Eq for PackOr<P, B> {}

impl<P: Packed + std::fmt::Debug, B: std::fmt::Debug> std::fmt::Debug for PackOr<P, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.get() {
            Rep::Pack(p) => f.debug_tuple("Pack").field(p).finish(),
            Rep::Big(b) => f.debug_tuple("Big").field(b).finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splice_grows_and_shrinks_exactly() {
        let mut b = PackBuf::new();
        assert_eq!((b.len(), b.count(), b.bytes()), (0, 0, &[][..]));
        b.push(b"hello");
        b.splice(0..0, b">> ");
        b.set_count(2);
        assert_eq!(b.bytes(), b">> hello");
        b.splice(3..5, b"HE-");
        assert_eq!(b.bytes(), b">> HE-llo");
        b.splice(0..6, b"");
        assert_eq!(b.bytes(), b"llo");
        b.bytes_mut()[0] = b'L';
        let c = b.clone();
        assert_eq!((c.bytes(), c.count()), (&b"Llo"[..], 2));
        assert_eq!(c, b);
        b.splice(0..3, b"");
        assert!(b.is_empty());
    }

    #[derive(Clone, Debug, PartialEq)]
    struct Big(Vec<u32>);

    #[test]
    fn pack_or_big_round_trips_and_drops() {
        let mut x: PackOr<PackBuf, Big> = PackOr::pack(PackBuf::from_slice(b"abc", 1));
        assert!(!x.is_big());
        if let Rep::Pack(p) = x.get_mut() {
            p.push(&[b'd'; 100]);
        }
        match x.get() {
            Rep::Pack(p) => assert_eq!(p.len(), 103),
            Rep::Big(_) => panic!("packed"),
        }
        let y = x.clone();
        assert_eq!(x, y);
        x = PackOr::big(Box::new(Big(vec![1, 2, 3])));
        assert!(x.is_big());
        if let Rep::Big(b) = x.get_mut() {
            b.0.push(4);
        }
        match x.get() {
            Rep::Big(b) => assert_eq!(b.0, [1, 2, 3, 4]),
            Rep::Pack(_) => panic!("big"),
        }
        assert_ne!(x, y);
        assert_eq!(x.clone(), x);
        assert_eq!(std::mem::size_of::<PackOr<PackBuf, Big>>(), 8);
    }
}
