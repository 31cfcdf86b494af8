//! A set (Redis's t_set.c): "intset" while small and all-integer, "hashtable" otherwise.
//!
//! (Scaffold: the representation is being written; this placeholder only lets the rest of the tree
//! name the type.)

/// A set (Redis's t_set.c): "intset" while small and all-integer, "hashtable" otherwise.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Set {
    len: usize,
}

impl Set {
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

    /// Calls `f` on every member (ZUNION/ZINTER/ZDIFF read sets through this). The placeholder
    /// holds no members; the real set type provides the same method.
    pub fn for_each_member(&self, _f: impl FnMut(&[u8])) {}
}
