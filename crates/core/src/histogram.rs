//! A latency histogram with Redis's precision: values (nanoseconds) up to one second, every power
//! of two split into 128 equal sub-buckets, so a recorded value is known to within 1/128 (what an
//! HdrHistogram with two significant figures keeps, the kind Redis uses for INFO latencystats and
//! LATENCY HISTOGRAM). Values below 256 are kept exactly. Recording is an index computation and an
//! increment. The counters come in chunks of 128 (1 KiB), each allocated by the first value that
//! falls in it: a command's durations span a few powers of two, so it holds a few KiB rather than
//! the 24 KiB of the whole range — per command and per thread, as every thread keeps its own.

/// Largest value kept; larger ones count as this (Redis's 1 s ceiling).
pub const MAX_VALUE: u64 = 1_000_000_000;

/// Bits of sub-bucket index: each power of two above 2^7 is split in 2^7 = 128 sub-buckets.
const SUB_BITS: u32 = 8;
const HALF: usize = 1 << (SUB_BITS - 1);

/// Number of counters: the index of [`MAX_VALUE`], plus one.
const LEN: usize = index(MAX_VALUE) + 1;

/// The counter of value `v` (at most [`MAX_VALUE`]).
const fn index(v: u64) -> usize {
    if v < (1 << SUB_BITS) {
        return v as usize;
    }
    let e = 63 - v.leading_zeros();
    let shift = e - (SUB_BITS - 1);
    ((shift as usize) << (SUB_BITS - 1)) + (v >> shift) as usize
}

/// The largest value counted by counter `i`.
const fn highest(i: usize) -> u64 {
    if i < (1 << SUB_BITS) {
        return i as u64;
    }
    let shift = (i >> (SUB_BITS - 1)) - 1;
    let sub = (i & (HALF - 1)) + HALF;
    (((sub + 1) as u64) << shift) - 1
}

/// Counters per chunk.
const CHUNK: usize = 128;
/// Number of chunks covering the counters.
const CHUNKS: usize = LEN.div_ceil(CHUNK);

/// Counts of recorded values; see the module docs.
#[derive(Clone, Default)]
pub struct Histogram {
    /// `CHUNKS` chunks once anything was recorded, each allocated on first use.
    chunks: Vec<Option<Box<[u64; CHUNK]>>>,
    total: u64,
}

impl Histogram {
    pub fn new() -> Histogram {
        Histogram::default()
    }

    /// Counts one value (nanoseconds; above [`MAX_VALUE`] counts as it).
    #[inline]
    pub fn record(&mut self, value: u64) {
        let i = index(value.min(MAX_VALUE));
        if let Some(Some(chunk)) = self.chunks.get_mut(i / CHUNK) {
            chunk[i % CHUNK] += 1;
            self.total += 1;
        } else {
            self.add(i, 1);
        }
    }

    /// Adds `n` to counter `i`, allocating what it needs (the first value in a chunk).
    #[cold]
    fn add(&mut self, i: usize, n: u64) {
        if self.chunks.is_empty() {
            self.chunks.resize(CHUNKS, None);
        }
        let chunk = self.chunks[i / CHUNK].get_or_insert_with(|| Box::new([0; CHUNK]));
        chunk[i % CHUNK] += n;
        self.total += n;
    }

    /// `(counter, count)` for every counter that counted something, in value order.
    fn counts(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.chunks.iter().enumerate().flat_map(|(c, chunk)| {
            chunk.iter().flat_map(move |counts| {
                counts
                    .iter()
                    .enumerate()
                    .filter(|(_, &n)| n > 0)
                    .map(move |(j, &n)| (c * CHUNK + j, n))
            })
        })
    }

    /// Number of values recorded.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Adds `other`'s counts to this one's.
    pub fn merge(&mut self, other: &Histogram) {
        for (i, n) in other.counts() {
            self.add(i, n);
        }
    }

    /// The value at `percentile` (0 to 100): the highest value of the counter where the
    /// cumulative count reaches that share of the total (HdrHistogram's `value_at_percentile`); 0
    /// when nothing was recorded.
    pub fn value_at_percentile(&self, percentile: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let p = percentile.clamp(0.0, 100.0);
        let wanted = ((p / 100.0) * self.total as f64 + 0.5) as u64;
        let wanted = wanted.max(1);
        let mut seen = 0;
        for (i, n) in self.counts() {
            seen += n;
            if seen >= wanted {
                return highest(i);
            }
        }
        highest(LEN - 1)
    }

    /// The cumulative distribution at powers of two from `first` on (`first`, `2 * first`, ...),
    /// as HdrHistogram's logarithmic iteration gives it and LATENCY HISTOGRAM reports it (with
    /// `first` = 1024 ns): for each step, the highest value of the counter holding the power of
    /// two and how many values lie up to it; a step is listed only when its count grew.
    pub fn log2_cdf(&self, first: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut bound = first.max(1);
        let mut seen = 0u64;
        let mut counts = self.counts().peekable();
        while seen < self.total {
            let top = index(bound.min(MAX_VALUE));
            let before = seen;
            while let Some((_, n)) = counts.next_if(|&(i, _)| i <= top) {
                seen += n;
            }
            if seen > before {
                out.push((highest(top), seen));
            }
            if top == LEN - 1 {
                break;
            }
            bound = bound.saturating_mul(2);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_cover_every_value_once_and_in_order() {
        let mut last = None;
        for v in (0..5000u64)
            .chain((5000..MAX_VALUE).step_by(99_991))
            .chain([MAX_VALUE])
        {
            let i = index(v);
            assert!(v <= highest(i), "{v} above its counter {i}");
            assert!(
                i == 0 || highest(i - 1) < v,
                "{v} belongs to an earlier counter"
            );
            if let Some(l) = last {
                assert!(i >= l);
            }
            last = Some(i);
        }
        assert_eq!(index(MAX_VALUE), LEN - 1);
    }

    #[test]
    fn precision_is_one_128th_as_redis_reports_it() {
        // Redis printed p50=6.015 (µs) for values near 6 µs: the counter [5984, 6015].
        assert_eq!(highest(index(6000)), 6015);
        assert_eq!(highest(index(255)), 255);
        for v in [256u64, 1000, 65_537, 999_999_999] {
            let h = highest(index(v));
            assert!(h >= v && (h - v) as f64 <= v as f64 / 128.0, "{v} -> {h}");
        }
    }

    #[test]
    fn percentiles_follow_the_cumulative_count() {
        let mut h = Histogram::new();
        assert_eq!(h.value_at_percentile(50.0), 0);
        for v in 1..=100u64 {
            h.record(v * 1000);
        }
        assert_eq!(h.total(), 100);
        let p50 = h.value_at_percentile(50.0);
        assert!((50_000..50_000 + 50_000 / 128).contains(&p50), "{p50}");
        let p100 = h.value_at_percentile(100.0);
        assert!(
            (100_000..100_000 + 100_000 / 128 + 1).contains(&p100),
            "{p100}"
        );
        assert_eq!(h.value_at_percentile(0.0), highest(index(1000)));
        // Over the ceiling counts as the ceiling.
        h.record(5 * MAX_VALUE);
        assert_eq!(h.value_at_percentile(100.0), highest(index(MAX_VALUE)));
    }

    #[test]
    fn chunks_are_allocated_where_values_fall() {
        let mut h = Histogram::new();
        assert!(
            h.chunks.is_empty(),
            "nothing allocated before the first value"
        );
        for v in [1_500u64, 1_600, 1_900] {
            h.record(v);
        }
        assert_eq!(h.chunks.iter().filter(|c| c.is_some()).count(), 1);
        assert_eq!(h.counts().map(|(_, n)| n).sum::<u64>(), 3);
    }

    #[test]
    fn merged_histograms_count_both() {
        let (mut a, mut b) = (Histogram::new(), Histogram::new());
        a.record(10);
        b.record(10);
        b.record(1_000_000);
        a.merge(&b);
        a.merge(&Histogram::new());
        assert_eq!(a.total(), 3);
        assert_eq!(a.log2_cdf(1024), [(1031, 2), (1_056_767, 3)]);
    }

    #[test]
    fn the_cdf_reports_each_power_of_two_where_the_count_grew() {
        let mut h = Histogram::new();
        assert!(h.log2_cdf(1024).is_empty());
        for v in [6_000, 7_000, 7_000, 20_000] {
            h.record(v);
        }
        // As Redis reports them (keys 8 and 33 µs): 3 values up to the counter of 8192 ns, 4 up
        // to that of 32768 (nothing new at 16384).
        assert_eq!(h.log2_cdf(1024), [(8255, 3), (33_023, 4)]);
        h.record(MAX_VALUE);
        assert_eq!(h.log2_cdf(1024).last(), Some(&(highest(LEN - 1), 5)));
    }
}
