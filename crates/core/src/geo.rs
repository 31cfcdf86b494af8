//! Geohash math for the GEO commands, with Redis 7.0's exact arithmetic.
//!
//! A point is stored as a sorted-set score: the 52-bit interleaved geohash of its (longitude,
//! latitude) at 26 bits per coordinate, over longitude [-180, 180] and latitude
//! [-85.05112878, 85.05112878] (the Web Mercator limits). Latitude bits take the even positions,
//! longitude bits the odd ones, so points close in both coordinates get close scores and a geohash
//! cell of any precision is one contiguous score range.
//!
//! A search by radius or box estimates a cell precision (`step`) from the radius, takes the cell
//! holding the centre and its eight neighbours, drops the neighbours the shape's bounding box cannot
//! reach, and scans each remaining cell's score range, keeping the points inside the shape.
//!
//! Invariants, all so that replies are byte-identical to Redis's:
//! * every formula evaluates in the same order as Redis's C code (geohash.c, geohash_helper.c), so
//!   the f64 results are bit-identical; `sin`, `cos`, `asin` and `sqrt` are the platform libm's;
//! * a point decodes to the centre of its 26-bit cell, clamped to the coordinate limits;
//! * a score that is not a geohash (any ZADD score) decodes the way Redis's `(uint64_t)` cast of the
//!   double does on x86-64, so GEOPOS of such a member answers what Redis answers;
//! * a partial sort (COUNT smaller than the matches) orders ties as Redis's `pqsort` does.

use std::cmp::Ordering;

/// Longitude limits.
pub const LONG_MIN: f64 = -180.0;
pub const LONG_MAX: f64 = 180.0;
/// Latitude limits (EPSG:900913 / Web Mercator).
pub const LAT_MIN: f64 = -85.05112878;
pub const LAT_MAX: f64 = 85.05112878;
/// Bits per coordinate of a stored point (52 bits in all).
pub const STEP_MAX: u8 = 26;
/// Earth's quadratic mean radius for WGS-84, in meters (Redis's constant).
pub const EARTH_RADIUS_IN_METERS: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;
const D_R: f64 = std::f64::consts::PI / 180.0;

fn deg_rad(ang: f64) -> f64 {
    ang * D_R
}

fn rad_deg(ang: f64) -> f64 {
    ang / D_R
}

/// A coordinate range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    pub min: f64,
    pub max: f64,
}

/// The ranges stored points are encoded against.
pub const LONG_RANGE: Range = Range {
    min: LONG_MIN,
    max: LONG_MAX,
};
pub const LAT_RANGE: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};

/// A geohash cell: `step` bits per coordinate, interleaved in `bits`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashBits {
    pub bits: u64,
    pub step: u8,
}

impl HashBits {
    /// The half-open score range `[min, max)` holding every stored point inside this cell.
    pub fn score_range(&self) -> (f64, f64) {
        let shift = 52 - u32::from(self.step) * 2;
        let min = self.bits << shift;
        let max = self.bits.wrapping_add(1) << shift;
        (min as f64, max as f64)
    }
}

/// A cell's extent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Area {
    pub longitude: Range,
    pub latitude: Range,
}

/// Spreads the low 32 bits of `x` over the even bit positions and those of `y` over the odd ones.
fn interleave64(x: u32, y: u32) -> u64 {
    const B: [u64; 5] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
    ];
    const S: [u32; 5] = [1, 2, 4, 8, 16];
    let (mut x, mut y) = (u64::from(x), u64::from(y));
    for i in (0..5).rev() {
        x = (x | (x << S[i])) & B[i];
        y = (y | (y << S[i])) & B[i];
    }
    x | (y << 1)
}

/// The inverse of [`interleave64`]: even bits in the low half, odd bits in the high half.
fn deinterleave64(v: u64) -> u64 {
    const B: [u64; 6] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
        0x00000000FFFFFFFF,
    ];
    const S: [u32; 6] = [0, 1, 2, 4, 8, 16];
    let (mut x, mut y) = (v, v >> 1);
    for i in 0..6 {
        x = (x | (x >> S[i])) & B[i];
        y = (y | (y >> S[i])) & B[i];
    }
    x | (y << 32)
}

/// Encodes a point against the given ranges at `step` bits per coordinate (`geohashEncode`).
/// None outside the ranges or the coordinate limits.
pub fn encode(
    long_range: Range,
    lat_range: Range,
    longitude: f64,
    latitude: f64,
    step: u8,
) -> Option<HashBits> {
    if step == 0 || step > 32 {
        return None;
    }
    if !(LONG_MIN..=LONG_MAX).contains(&longitude) || !(LAT_MIN..=LAT_MAX).contains(&latitude) {
        return None;
    }
    if latitude < lat_range.min
        || latitude > lat_range.max
        || longitude < long_range.min
        || longitude > long_range.max
    {
        return None;
    }
    let mut lat_offset = (latitude - lat_range.min) / (lat_range.max - lat_range.min);
    let mut long_offset = (longitude - long_range.min) / (long_range.max - long_range.min);
    let scale = (1u64 << step) as f64;
    lat_offset *= scale;
    long_offset *= scale;
    Some(HashBits {
        bits: interleave64(lat_offset as u32, long_offset as u32),
        step,
    })
}

/// The cell `hash` covers, against the given ranges (`geohashDecode`).
pub fn decode(long_range: Range, lat_range: Range, hash: HashBits) -> Area {
    let sep = deinterleave64(hash.bits);
    let lat_scale = lat_range.max - lat_range.min;
    let long_scale = long_range.max - long_range.min;
    let ilato = sep as u32;
    let ilono = (sep >> 32) as u32;
    let div = (1u64 << hash.step) as f64;
    Area {
        latitude: Range {
            min: lat_range.min + (f64::from(ilato) * 1.0 / div) * lat_scale,
            max: lat_range.min + (f64::from(ilato.wrapping_add(1)) * 1.0 / div) * lat_scale,
        },
        longitude: Range {
            min: long_range.min + (f64::from(ilono) * 1.0 / div) * long_scale,
            max: long_range.min + (f64::from(ilono.wrapping_add(1)) * 1.0 / div) * long_scale,
        },
    }
}

/// The centre of a cell, clamped to the coordinate limits: `[longitude, latitude]`.
fn area_center(a: &Area) -> [f64; 2] {
    let lon = ((a.longitude.min + a.longitude.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((a.latitude.min + a.latitude.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    [lon, lat]
}

/// C's `(uint64_t)` conversion of a double as x86-64 code performs it (values below 2^63 through
/// a signed truncation, the others offset by 2^63; out-of-range inputs give the "integer
/// indefinite" pattern). Only scores that are not geohashes reach the odd cases.
fn c_double_to_u64(d: f64) -> u64 {
    const TWO63: f64 = 9223372036854775808.0;
    fn cvtt(d: f64) -> u64 {
        if d.is_nan() || !(-TWO63..TWO63).contains(&d) {
            i64::MIN as u64
        } else {
            d as i64 as u64
        }
    }
    if d >= TWO63 {
        cvtt(d - TWO63) ^ (1u64 << 63)
    } else {
        cvtt(d)
    }
}

/// The stored score of a point (`geohashEncodeWGS84` at step 26, aligned to 52 bits). None
/// outside the coordinate limits.
pub fn score_of(longitude: f64, latitude: f64) -> Option<f64> {
    let h = encode(LONG_RANGE, LAT_RANGE, longitude, latitude, STEP_MAX)?;
    Some(h.bits as f64)
}

/// The `[longitude, latitude]` a score decodes to (the centre of its cell).
pub fn decode_score(score: f64) -> [f64; 2] {
    let hash = HashBits {
        bits: c_double_to_u64(score),
        step: STEP_MAX,
    };
    area_center(&decode(LONG_RANGE, LAT_RANGE, hash))
}

/// The 11-character standard geohash (latitude over [-90, 90]) of the point a score holds, as
/// GEOHASH answers it: 52 bits, then a final character for the 3 bits Redis does not have.
pub fn geohash_string(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let [lon, lat] = decode_score(score);
    let std_lat = Range {
        min: -90.0,
        max: 90.0,
    };
    let bits = encode(LONG_RANGE, std_lat, lon, lat, STEP_MAX).map_or(0, |h| h.bits);
    let mut out = [b'0'; 11];
    for (i, c) in out.iter_mut().enumerate().take(10) {
        let idx = (bits >> (52 - (i + 1) * 5)) & 0x1f;
        *c = ALPHABET[idx as usize];
    }
    out
}

/// Great-circle distance in meters (haversine, Redis 7.0's formula).
pub fn distance(lon1d: f64, lat1d: f64, lon2d: f64, lat2d: f64) -> f64 {
    let lat1r = deg_rad(lat1d);
    let lon1r = deg_rad(lon1d);
    let lat2r = deg_rad(lat2d);
    let lon2r = deg_rad(lon2d);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let v = ((lon2r - lon1r) / 2.0).sin();
    2.0 * EARTH_RADIUS_IN_METERS * (u * u + lat1r.cos() * lat2r.cos() * v * v).sqrt().asin()
}

fn move_x(hash: &mut HashBits, d: i8) {
    if d == 0 {
        return;
    }
    let mut x = hash.bits & 0xaaaaaaaaaaaaaaaa;
    let y = hash.bits & 0x5555555555555555;
    let zz = 0x5555555555555555u64 >> (64 - u32::from(hash.step) * 2);
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xaaaaaaaaaaaaaaaau64 >> (64 - u32::from(hash.step) * 2);
    hash.bits = x | y;
}

fn move_y(hash: &mut HashBits, d: i8) {
    if d == 0 {
        return;
    }
    let x = hash.bits & 0xaaaaaaaaaaaaaaaa;
    let mut y = hash.bits & 0x5555555555555555;
    let zz = 0xaaaaaaaaaaaaaaaau64 >> (64 - u32::from(hash.step) * 2);
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555555555555555u64 >> (64 - u32::from(hash.step) * 2);
    hash.bits = x | y;
}

fn neighbor(hash: HashBits, dx: i8, dy: i8) -> HashBits {
    let mut h = hash;
    move_x(&mut h, dx);
    move_y(&mut h, dy);
    h
}

/// What a search covers: a circle (radius) or an axis-aligned box (width × height), in the
/// request's unit; `conversion` turns that unit into meters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ShapeKind {
    Circle { radius: f64 },
    Box { width: f64, height: f64 },
}

/// A search shape around a centre.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    pub longitude: f64,
    pub latitude: f64,
    /// Meters per unit of the request.
    pub conversion: f64,
    pub kind: ShapeKind,
}

/// The cell precision for a search of this radius around this latitude
/// (`geohashEstimateStepsByRadius`).
pub fn estimate_steps_by_radius(range_meters: f64, lat: f64) -> u8 {
    if range_meters == 0.0 {
        return 26;
    }
    let mut range = range_meters;
    let mut step: i32 = 1;
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

impl Shape {
    /// The shape's bounding box `[min lon, min lat, max lon, max lat]` (`geohashBoundingBox`).
    pub fn bounding_box(&self) -> [f64; 4] {
        let (h, w) = match self.kind {
            ShapeKind::Circle { radius } => (radius, radius),
            ShapeKind::Box { width, height } => (height / 2.0, width / 2.0),
        };
        let height = self.conversion * h;
        let width = self.conversion * w;
        let lat_delta = rad_deg(height / EARTH_RADIUS_IN_METERS);
        let long_delta_top =
            rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(self.latitude + lat_delta).cos());
        let long_delta_bottom =
            rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(self.latitude - lat_delta).cos());
        let long_delta = if self.latitude < 0.0 {
            long_delta_bottom
        } else {
            long_delta_top
        };
        [
            self.longitude - long_delta,
            self.latitude - lat_delta,
            self.longitude + long_delta,
            self.latitude + lat_delta,
        ]
    }

    /// The cells to scan, in Redis's order (centre, N, S, E, W, NE, NW, SE, SW), without the
    /// neighbours the bounding box cannot reach and without a cell equal to the last one kept
    /// (very large radii make neighbours coincide) — `geohashCalculateAreasByShapeWGS84` plus the
    /// skipping of `membersOfAllNeighbors`.
    pub fn cells(&self) -> Vec<HashBits> {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounding_box();
        let (lon, lat) = (self.longitude, self.latitude);
        let radius_meters = match self.kind {
            ShapeKind::Circle { radius } => radius,
            ShapeKind::Box { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
            }
        } * self.conversion;
        let mut steps = estimate_steps_by_radius(radius_meters, lat);
        let around = |steps: u8| {
            let hash = encode(LONG_RANGE, LAT_RANGE, lon, lat, steps).unwrap_or(HashBits {
                bits: 0,
                step: steps,
            });
            let n: [HashBits; 9] = [
                hash,
                neighbor(hash, 0, 1),
                neighbor(hash, 0, -1),
                neighbor(hash, 1, 0),
                neighbor(hash, -1, 0),
                neighbor(hash, 1, 1),
                neighbor(hash, -1, 1),
                neighbor(hash, 1, -1),
                neighbor(hash, -1, -1),
            ];
            n
        };
        let mut n = around(steps);
        let decrease = {
            let north = decode(LONG_RANGE, LAT_RANGE, n[1]);
            let south = decode(LONG_RANGE, LAT_RANGE, n[2]);
            let east = decode(LONG_RANGE, LAT_RANGE, n[3]);
            let west = decode(LONG_RANGE, LAT_RANGE, n[4]);
            north.latitude.max < max_lat
                || south.latitude.min > min_lat
                || east.longitude.max < max_lon
                || west.longitude.min > min_lon
        };
        if steps > 1 && decrease {
            steps -= 1;
            n = around(steps);
        }
        let area = decode(LONG_RANGE, LAT_RANGE, n[0]);
        let mut keep = [true; 9];
        if steps >= 2 {
            let mut drop = |idx: &[usize]| idx.iter().for_each(|&i| keep[i] = false);
            if area.latitude.min < min_lat {
                drop(&[2, 8, 7]);
            }
            if area.latitude.max > max_lat {
                drop(&[1, 5, 6]);
            }
            if area.longitude.min < min_lon {
                drop(&[4, 8, 6]);
            }
            if area.longitude.max > max_lon {
                drop(&[3, 7, 5]);
            }
        }
        let mut out: Vec<HashBits> = Vec::with_capacity(9);
        let mut last_processed = 0;
        for i in 0..9 {
            // A dropped cell is Redis's zeroed cell (bits 0, step 0), and the centre's bits and
            // step are never both zero, so "kept" is exactly "not zero".
            if !keep[i] {
                continue;
            }
            if last_processed != 0 && n[i] == n[last_processed] {
                continue;
            }
            out.push(n[i]);
            last_processed = i;
        }
        out
    }

    /// If the point a score holds lies inside the shape: its `[longitude, latitude]` and its
    /// distance from the centre in meters (`geoWithinShape`).
    pub fn contains(&self, score: f64) -> Option<([f64; 2], f64)> {
        let xy = decode_score(score);
        let d = match self.kind {
            ShapeKind::Circle { radius } => {
                let d = distance(self.longitude, self.latitude, xy[0], xy[1]);
                if d > radius * self.conversion {
                    return None;
                }
                d
            }
            ShapeKind::Box { width, height } => {
                let (width_m, height_m) = (width * self.conversion, height * self.conversion);
                let lon_distance = distance(xy[0], xy[1], self.longitude, xy[1]);
                let lat_distance = distance(xy[0], xy[1], xy[0], self.latitude);
                if lon_distance > width_m / 2.0 || lat_distance > height_m / 2.0 {
                    return None;
                }
                distance(self.longitude, self.latitude, xy[0], xy[1])
            }
        };
        Some((xy, d))
    }
}

/// Sorts `v` far enough that positions `0..=last` hold what a full sort would put there, with
/// ties arranged exactly as Redis's `pqsort` (Bentley–McIlroy quicksort that skips partitions
/// outside the wanted range) arranges them.
pub fn partial_sort<T>(v: &mut [T], last: usize, cmp: &impl Fn(&T, &T) -> Ordering) {
    if v.is_empty() {
        return;
    }
    pqsort(v, 0, v.len(), 0, last, cmp);
}

fn med3<T>(v: &[T], a: usize, b: usize, c: usize, cmp: &impl Fn(&T, &T) -> Ordering) -> usize {
    if cmp(&v[a], &v[b]) == Ordering::Less {
        if cmp(&v[b], &v[c]) == Ordering::Less {
            b
        } else if cmp(&v[a], &v[c]) == Ordering::Less {
            c
        } else {
            a
        }
    } else if cmp(&v[b], &v[c]) == Ordering::Greater {
        b
    } else if cmp(&v[a], &v[c]) == Ordering::Less {
        a
    } else {
        c
    }
}

fn vecswap<T>(v: &mut [T], a: usize, b: usize, n: usize) {
    for i in 0..n {
        v.swap(a + i, b + i);
    }
}

/// The partition [a, a + n) of the whole slice; `lo..=hi` is the wanted range.
fn pqsort<T>(
    v: &mut [T],
    mut a: usize,
    mut n: usize,
    lo: usize,
    hi: usize,
    cmp: &impl Fn(&T, &T) -> Ordering,
) {
    let outside = |s: usize, e: usize| (lo < s && hi < s) || (lo > e && hi > e);
    loop {
        if n < 7 {
            for pm in a + 1..a + n {
                let mut pl = pm;
                while pl > a && cmp(&v[pl - 1], &v[pl]) == Ordering::Greater {
                    v.swap(pl, pl - 1);
                    pl -= 1;
                }
            }
            return;
        }
        let mut pm = a + n / 2;
        if n > 7 {
            let mut pl = a;
            let mut pn = a + n - 1;
            if n > 40 {
                let d = n / 8;
                pl = med3(v, pl, pl + d, pl + 2 * d, cmp);
                pm = med3(v, pm - d, pm, pm + d, cmp);
                pn = med3(v, pn - 2 * d, pn - d, pn, cmp);
            }
            pm = med3(v, pl, pm, pn, cmp);
        }
        v.swap(a, pm);
        let (mut pa, mut pb) = (a + 1, a + 1);
        let (mut pc, mut pd) = (a + n - 1, a + n - 1);
        loop {
            while pb <= pc {
                let c = cmp(&v[pb], &v[a]);
                if c == Ordering::Greater {
                    break;
                }
                if c == Ordering::Equal {
                    v.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb <= pc {
                let c = cmp(&v[pc], &v[a]);
                if c == Ordering::Less {
                    break;
                }
                if c == Ordering::Equal {
                    v.swap(pc, pd);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb > pc {
                break;
            }
            v.swap(pb, pc);
            pb += 1;
            pc -= 1;
        }
        let pn = a + n;
        let r = (pa - a).min(pb - pa);
        vecswap(v, a, pb - r, r);
        let r = (pd - pc).min(pn - pd - 1);
        vecswap(v, pb, pn - r, r);
        let r = pb - pa;
        if r > 1 && !outside(a, a + r - 1) {
            pqsort(v, a, r, lo, hi, cmp);
        }
        let r = pd - pc;
        if r > 1 {
            a = pn - r;
            n = r;
            if !outside(a, a + r - 1) {
                continue;
            }
        }
        return;
    }
}

// No unsafe code in this module: Miri (scripts/test.sh) would only make its long loops slow.
#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    #[test]
    fn interleave_round_trips() {
        for (x, y) in [
            (0u32, 0u32),
            (1, 0),
            (0, 1),
            (0x3ffffff, 0x1234567),
            (u32::MAX, 7),
        ] {
            let v = deinterleave64(interleave64(x, y));
            assert_eq!((v as u32, (v >> 32) as u32), (x, y));
        }
    }

    #[test]
    fn scores_and_positions_match_redis() {
        // GEOADD g 10 10 a → ZSCORE 3386427883058495, GEOPOS 10.00000208616256714 10.00000092823272979.
        assert_eq!(score_of(10.0, 10.0), Some(3386427883058495.0));
        let [lon, lat] = decode_score(3386427883058495.0);
        assert_eq!(format!("{lon:.17}"), "10.00000208616256714");
        assert_eq!(format!("{lat:.17}"), "10.00000092823272979");
        assert_eq!(&geohash_string(3386427883058495.0), b"s1z0gs3y0z0");
        assert_eq!(score_of(180.1, 0.0), None);
        assert_eq!(score_of(0.0, 85.06), None);
        // The top corner sets bits above 52, as in Redis.
        assert_eq!(score_of(180.0, LAT_MAX), Some((3u64 << 52) as f64));
    }

    #[test]
    fn odd_scores_decode_like_the_c_cast() {
        assert_eq!(c_double_to_u64(-5.0), (-5i64) as u64);
        assert_eq!(c_double_to_u64(f64::INFINITY), 0);
        assert_eq!(c_double_to_u64(f64::NEG_INFINITY), 1u64 << 63);
        assert_eq!(c_double_to_u64(1.5e19), 15_000_000_000_000_000_000);
        let [lon, lat] = decode_score(-1.0);
        assert!((LONG_MIN..=LONG_MAX).contains(&lon) && (LAT_MIN..=LAT_MAX).contains(&lat));
    }

    #[test]
    fn distance_is_haversine() {
        // Redis: GEODIST between (13.361389, 38.115556) and (15.087269, 37.502669) = 166274.1516 m.
        let a = decode_score(score_of(13.361389, 38.115556).unwrap());
        let b = decode_score(score_of(15.087269, 37.502669).unwrap());
        assert_eq!(
            format!("{:.4}", distance(a[0], a[1], b[0], b[1])),
            "166274.1516"
        );
        assert_eq!(distance(1.0, 2.0, 1.0, 2.0), 0.0);
    }

    #[test]
    fn steps_shrink_with_radius_and_near_poles() {
        assert_eq!(estimate_steps_by_radius(0.0, 0.0), 26);
        assert_eq!(estimate_steps_by_radius(1.0, 0.0), 24);
        assert_eq!(estimate_steps_by_radius(1.0, 70.0), 23);
        assert_eq!(estimate_steps_by_radius(1.0, -85.0), 22);
        assert_eq!(estimate_steps_by_radius(1e9, 0.0), 1);
        assert_eq!(estimate_steps_by_radius(f64::INFINITY, 0.0), 1);
    }

    #[test]
    fn cells_cover_the_centre_and_skip_repeats() {
        let s = Shape {
            longitude: 10.0,
            latitude: 10.0,
            conversion: 1000.0,
            kind: ShapeKind::Circle { radius: 100.0 },
        };
        let cells = s.cells();
        assert!(!cells.is_empty() && cells.len() <= 9);
        let score = score_of(10.0, 10.0).unwrap();
        assert!(cells.iter().any(|c| {
            let (min, max) = c.score_range();
            min <= score && score < max
        }));
        let huge = Shape {
            kind: ShapeKind::Circle { radius: 1e7 },
            ..s
        };
        let cells = huge.cells();
        for w in cells.windows(2).skip(1) {
            assert_ne!(w[0], w[1]);
        }
        assert!(s.contains(score).is_some());
        let far = score_of(11.0, 11.0).unwrap();
        assert!(s.contains(far).is_none());
    }

    #[test]
    fn partial_sort_orders_the_wanted_prefix() {
        let mut state = 12345u64;
        for n in [0usize, 1, 5, 7, 8, 40, 41, 200] {
            let mut v: Vec<(u32, usize)> = (0..n)
                .map(|i| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (((state >> 33) % 10) as u32, i)
                })
                .collect();
            let mut sorted = v.clone();
            sorted.sort_by_key(|e| e.0);
            let last = n / 3;
            partial_sort(&mut v, last, &|a: &(u32, usize), b: &(u32, usize)| {
                a.0.cmp(&b.0)
            });
            for i in 0..n.min(last + 1) {
                assert_eq!(v[i].0, sorted[i].0, "n {n} i {i}");
            }
            let mut all: Vec<usize> = v.iter().map(|e| e.1).collect();
            all.sort_unstable();
            assert_eq!(all, (0..n).collect::<Vec<_>>());
        }
    }
}
