//! The geo family, reply for reply against redis-server: GEOADD, GEODIST, GEOHASH, GEOPOS,
//! GEOSEARCH, GEOSEARCHSTORE, GEORADIUS, GEORADIUS_RO, GEORADIUSBYMEMBER and
//! GEORADIUSBYMEMBER_RO, with every option and error reply, in RESP2 and RESP3.
//!
//! Every reply is compared byte for byte, including the order of unsorted search results (the
//! order of Redis's neighbour cells) and of ties under COUNT (Redis's partial quicksort). Random
//! points cover the latitude limits and the antimeridian; random searches cover both shapes,
//! every unit and option, and both sorted-set encodings.

use crate::harness::{key_in, Diff, Pair};

/// Runs a command given as space-separated words on both servers.
fn run(d: &mut Pair, line: &str) {
    let args: Vec<&str> = line.split(' ').collect();
    d.run(&args);
}

fn hello3(d: &mut Pair) {
    d.run_matching(&["HELLO", "3"], |r| !r.is_error());
}

/// A small deterministic generator for the randomized tests.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }

    /// Uniform in [lo, hi].
    fn between(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * (self.below(1 << 30) as f64 / ((1u64 << 30) - 1) as f64)
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }

    /// A longitude: anywhere, or hugging the antimeridian or the prime meridian.
    fn lon(&mut self) -> String {
        match self.below(6) {
            0 => format!("{:.6}", self.between(179.9, 180.0)),
            1 => format!("{:.6}", self.between(-180.0, -179.9)),
            2 => self.pick(&["180", "-180", "0", "179.999999"]).to_string(),
            3 => format!("{:.5}", self.between(-1.0, 1.0)),
            _ => format!("{:.6}", self.between(-180.0, 180.0)),
        }
    }

    /// A latitude: anywhere, near the limits (±85.05112878), or past ±66 and ±80 where Redis
    /// widens its search cells.
    fn lat(&mut self) -> String {
        match self.below(6) {
            0 => format!("{:.6}", self.between(84.9, 85.05112878)),
            1 => format!("{:.6}", self.between(-85.05112878, -84.9)),
            2 => self
                .pick(&["85.05112878", "-85.05112878", "0", "66.5", "-80.5"])
                .to_string(),
            3 => format!("{:.6}", self.between(65.0, 82.0)),
            _ => format!("{:.6}", self.between(-85.05112878, 85.05112878)),
        }
    }
}

#[test]
fn commands_and_errors_match_redis() {
    let mut d = Diff::new();
    for proto in ["2", "3"] {
        if proto == "3" {
            hello3(&mut d);
        }
        run(&mut d, "FLUSHALL");
        let sicily = "GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania";
        run(&mut d, sicily);
        run(&mut d, sicily);
        run(&mut d, "ZRANGE Sicily 0 -1 WITHSCORES");
        // GEOADD options and errors.
        run(&mut d, "GEOADD Sicily NX 13 38 Palermo 14 37 New");
        run(&mut d, "GEOADD Sicily XX 13 38 Palermo 14 37 Other");
        run(&mut d, "GEOADD Sicily XX CH 13.361389 38.115556 Palermo");
        run(&mut d, "GEOADD Sicily CH XX 13.5 38.1 Palermo");
        run(&mut d, "GEOADD Sicily ch nx 1 2 x 3 4 Palermo");
        run(&mut d, "GEOADD Sicily NX XX 1 2 x");
        run(&mut d, "GEOADD Sicily GT 1 2 x");
        run(&mut d, "GEOADD Sicily INCR 1 2 x");
        run(&mut d, "GEOADD Sicily 1 2 x 3");
        run(&mut d, "GEOADD Sicily CH CH CH");
        run(&mut d, "GEOADD Sicily NX CH XX");
        run(&mut d, "GEOADD Sicily x 2 m");
        run(&mut d, "GEOADD Sicily 1 nan m");
        d.run(&["GEOADD", "Sicily", "1", " 2", "m"]);
        run(&mut d, "GEOADD Sicily 200 100 m");
        run(&mut d, "GEOADD Sicily -180.000001 0 m");
        run(&mut d, "GEOADD Sicily 0 85.05112879 m");
        run(&mut d, "GEOADD Sicily 0 -85.05112879 m");
        run(&mut d, "GEOADD Sicily 1e400 0 m");
        run(&mut d, "GEOADD Sicily 1 2 ok inf 0 bad");
        run(&mut d, "EXISTS ok");
        run(&mut d, "GEOADD Sicily");
        run(&mut d, "GEOADD Sicily 1 2");
        run(
            &mut d,
            "GEOADD limits 180 85.05112878 ne -180 -85.05112878 sw 0 0 origin 0x10 1e1 hex",
        );
        run(&mut d, "ZRANGE limits 0 -1 WITHSCORES");
        run(&mut d, "GEOPOS limits ne sw origin hex none");
        run(&mut d, "GEOHASH limits ne sw origin hex none");
        run(&mut d, "GEOADD Sicily XX 1 2 absent");
        run(&mut d, "EXISTS nokey");
        run(&mut d, "GEOADD nokey XX 1 2 absent");
        run(&mut d, "EXISTS nokey");
        // GEODIST.
        for unit in [
            None,
            Some("m"),
            Some("km"),
            Some("mi"),
            Some("ft"),
            Some("KM"),
            Some("Ft"),
        ] {
            let mut cmd = vec!["GEODIST", "Sicily", "Palermo", "Catania"];
            cmd.extend(unit);
            d.run(&cmd);
        }
        // A distance whose 4th decimal is a tie once scaled by 10000 in double precision:
        // Redis rounds it to even.
        run(&mut d, "GEOADD halfway 15.120647 36.170331 p3");
        run(&mut d, "ZADD halfway 92 f");
        run(&mut d, "GEODIST halfway p3 f ft");
        run(&mut d, "GEODIST Sicily Palermo Catania yards");
        run(&mut d, "GEODIST Sicily Palermo Catania km x");
        run(&mut d, "GEODIST Sicily Palermo none");
        run(&mut d, "GEODIST Sicily Palermo Palermo");
        run(&mut d, "GEODIST nokey a b");
        run(&mut d, "GEODIST nokey a b parsecs");
        run(&mut d, "GEODIST limits ne sw km");
        run(&mut d, "GEODIST Sicily");
        // GEOHASH and GEOPOS.
        run(&mut d, "GEOHASH Sicily Palermo Catania none");
        run(&mut d, "GEOHASH Sicily");
        run(&mut d, "GEOHASH nokey a b");
        run(&mut d, "GEOPOS Sicily Palermo Catania none");
        run(&mut d, "GEOPOS Sicily");
        run(&mut d, "GEOPOS nokey a");
        // Members whose scores are not geohashes decode as Redis's cast of the double does.
        run(
            &mut d,
            "ZADD odd -5 neg 1.5 frac 1e300 huge -inf ninf inf pinf 9007199254740993 big",
        );
        run(&mut d, "GEOPOS odd neg frac huge ninf pinf big");
        run(&mut d, "GEOHASH odd neg frac huge ninf pinf big");
        run(&mut d, "GEODIST odd neg frac");
        run(&mut d, "GEOSEARCH odd FROMMEMBER frac BYRADIUS 100 km");
        // Searches: the documented examples, then every option.
        run(
            &mut d,
            "GEOADD Sicily 12.758489 38.788135 edge1 17.241510 38.788135 edge2",
        );
        for line in [
            "GEORADIUS Sicily 15 37 200 km WITHDIST",
            "GEORADIUS Sicily 15 37 200 km WITHCOORD",
            "GEORADIUS Sicily 15 37 200 km WITHDIST WITHCOORD WITHHASH",
            "GEORADIUS Sicily 15 37 200 km ASC COUNT 1",
            "GEORADIUS Sicily 15 37 200 km DESC COUNT 2 ANY",
            "GEORADIUS Sicily 15 37 200 km COUNT 2 ANY",
            "GEORADIUS_RO Sicily 15 37 200 km WITHDIST DESC",
            "GEORADIUSBYMEMBER Sicily Palermo 200 km WITHDIST",
            "GEORADIUSBYMEMBER_RO Sicily Palermo 300 mi withhash asc",
            "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km ASC",
            "GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 400 400 km ASC WITHCOORD WITHDIST",
            "GEOSEARCH Sicily FROMMEMBER Palermo BYBOX 500 100 km WITHHASH",
            "GEOSEARCH Sicily frommember Catania byradius 1000000 ft desc count 3 withdist",
            "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 0 m",
            "GEOSEARCH Sicily FROMMEMBER Palermo BYRADIUS 0 m WITHDIST",
            "GEOSEARCH Sicily FROMMEMBER Palermo FROMMEMBER Catania BYRADIUS 1 km BYRADIUS 10 m",
            "GEOSEARCH nokey FROMMEMBER x BYRADIUS 1 km",
            "GEOSEARCH nokey FROMLONLAT 1 2 BYBOX 1 1 km WITHDIST",
            "GEORADIUSBYMEMBER nokey x 1 km",
            "GEORADIUS nokey 1 2 1 km",
            "GEORADIUS Sicily 1 2 1 km",
            "GEOSEARCH Sicily FROMLONLAT 0 0 BYRADIUS inf km WITHDIST ASC",
            "GEOSEARCH Sicily FROMLONLAT 0 0 BYRADIUS 1e308 km WITHDIST",
            "GEOSEARCH Sicily FROMLONLAT -0 -0 BYBOX inf 1 m",
            "GEOSEARCH Sicily FROMLONLAT 180 85.05112878 BYBOX 1e7 1e7 m WITHCOORD",
            "GEOSEARCH Sicily FROMLONLAT -180 -85.05112878 BYRADIUS 20000 km DESC",
            "GEOSEARCH Sicily FROMMEMBER Palermo BYRADIUS 1e-300 m WITHDIST",
            "GEOSEARCH Sicily FROMMEMBER Palermo BYRADIUS 20000 km COUNT 9223372036854775807",
            "GEOSEARCH Sicily FROMMEMBER Palermo BYRADIUS 20000 km COUNT 9223372036854775807 ANY",
            "GEOSEARCH Sicily FROMMEMBER Palermo BYRADIUS 20000 km COUNT 9223372036854775808",
            "GEORADIUS Sicily inf 0 1 km",
            "GEORADIUS Sicily 0 -inf 1 km",
        ] {
            run(&mut d, line);
        }
        // Argument errors, in Redis's order.
        for line in [
            "GEORADIUS Sicily x 37 200 km",
            "GEORADIUS Sicily 15 100 200 km",
            "GEORADIUS Sicily 15 37 x km",
            "GEORADIUS Sicily 15 37 -1 km",
            "GEORADIUS Sicily 15 37 1 yd",
            "GEORADIUS Sicily 15 37 1 km COUNT",
            "GEORADIUS Sicily 15 37 1 km COUNT x",
            "GEORADIUS Sicily 15 37 1 km COUNT 0",
            "GEORADIUS Sicily 15 37 1 km COUNT -3",
            "GEORADIUS Sicily 15 37 1 km ANY",
            "GEORADIUS Sicily 15 37 1 km FROMMEMBER x",
            "GEORADIUS Sicily 15 37 1 km STORE",
            "GEORADIUS Sicily 15 37 1 km STORE d WITHDIST",
            "GEORADIUS Sicily 15 37 1 km WITHHASH STOREDIST d",
            "GEORADIUS Sicily 15 37 1 km bogus",
            "GEORADIUS_RO Sicily 15 37 1 km STORE d",
            "GEORADIUSBYMEMBER Sicily none 1 km",
            "GEORADIUSBYMEMBER Sicily Palermo x km",
            "GEORADIUSBYMEMBER Sicily Palermo 1 parsec",
            "GEORADIUSBYMEMBER nokey none x parsec WITHDIST",
            "GEORADIUSBYMEMBER nokey none x parsec bogus",
            "GEORADIUSBYMEMBER_RO Sicily Palermo 1 km STOREDIST d",
            "GEOSEARCH Sicily BYRADIUS 1 km",
            "GEOSEARCH Sicily FROMLONLAT 1 2",
            "geosearch Sicily FROMLONLAT 1 2 WITHDIST",
            "GeoSearch Sicily BYBOX 1 2 m",
            "GEOSEARCH Sicily FROMLONLAT 1 2 FROMMEMBER Palermo BYRADIUS 1 m",
            "GEOSEARCH Sicily FROMMEMBER Palermo FROMLONLAT 1 2 BYRADIUS 1 m",
            "GEOSEARCH Sicily FROMMEMBER none BYRADIUS 1 m",
            "GEOSEARCH Sicily FROMLONLAT 1 2 BYRADIUS 1 m BYBOX 1 1 m",
            "GEOSEARCH Sicily FROMLONLAT 1 2 BYBOX 1 1 m BYRADIUS 1 m",
            "GEOSEARCH Sicily FROMLONLAT 1 2 BYBOX x 1 m",
            "GEOSEARCH Sicily FROMLONLAT 1 2 BYBOX 1 x m",
            "GEOSEARCH Sicily FROMLONLAT 1 2 BYBOX -1 1 m",
            "GEOSEARCH Sicily FROMLONLAT 1 2 BYBOX 1 -1 parsec",
            "GEOSEARCH Sicily FROMLONLAT 1 2 BYBOX 1 1 parsec",
            "GEOSEARCH Sicily FROMLONLAT 1 2 BYBOX 1 1",
            "GEOSEARCH Sicily FROMLONLAT 1 2 BYRADIUS 1",
            "GEOSEARCH Sicily FROMLONLAT 1 BYRADIUS 1 m",
            "GEOSEARCH Sicily FROMLONLAT 1 2 BYRADIUS 1 m STOREDIST",
            "GEOSEARCH Sicily FROMLONLAT 1 2 BYRADIUS 1 m STORE d",
            "GEOSEARCH Sicily FROMLONLAT 1 2 BYRADIUS 1 m ANY",
            "GEOSEARCH Sicily FROMLONLAT 1 2 BYRADIUS 1 m COUNT 1 ANY COUNT 0",
            "GEOSEARCHSTORE d Sicily FROMLONLAT 1 2 BYRADIUS 1 m WITHDIST",
            "GEOSEARCHSTORE d Sicily FROMLONLAT 1 2 BYRADIUS 1 m WITHCOORD STOREDIST",
            "GEOSEARCHSTORE d Sicily FROMLONLAT 1 2 BYRADIUS 1 m STORE x",
            "geosearchstore d Sicily BYRADIUS 1 m STOREDIST",
            "GEOSEARCHSTORE d nokey FROMMEMBER x BYRADIUS 1 m ANY",
            "GEOSEARCH Sicily",
            "GEORADIUS Sicily 1 2 3",
            "GEORADIUSBYMEMBER Sicily 1 2",
        ] {
            run(&mut d, line);
        }
        // STORE and STOREDIST, and their deleting the destination when nothing matches.
        run(&mut d, "GEORADIUS Sicily 15 37 200 km STORE dst");
        run(&mut d, "ZRANGE dst 0 -1 WITHSCORES");
        run(
            &mut d,
            "GEORADIUS Sicily 15 37 200 km STOREDIST dst DESC COUNT 1",
        );
        run(&mut d, "ZRANGE dst 0 -1 WITHSCORES");
        run(
            &mut d,
            "GEORADIUSBYMEMBER Sicily Palermo 300 km STORE dst ASC",
        );
        run(&mut d, "ZRANGE dst 0 -1 WITHSCORES");
        run(
            &mut d,
            "GEORADIUSBYMEMBER Sicily Palermo 300 km STOREDIST dst ASC",
        );
        run(&mut d, "ZRANGE dst 0 -1 WITHSCORES");
        run(&mut d, "OBJECT ENCODING dst");
        run(
            &mut d,
            "GEOSEARCHSTORE dst Sicily FROMMEMBER Catania BYBOX 500 500 km STOREDIST COUNT 2",
        );
        run(&mut d, "ZRANGE dst 0 -1 WITHSCORES");
        run(
            &mut d,
            "GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 200 mi",
        );
        run(&mut d, "ZRANGE dst 0 -1 WITHSCORES");
        run(
            &mut d,
            "GEOSEARCHSTORE dst Sicily FROMLONLAT -100 37 BYRADIUS 1 km",
        );
        run(&mut d, "EXISTS dst");
        run(&mut d, "SET dst string");
        run(
            &mut d,
            "GEOSEARCHSTORE dst nokey FROMLONLAT 15 37 BYRADIUS 1 km",
        );
        run(&mut d, "EXISTS dst");
        run(&mut d, "SET dst string");
        run(&mut d, "GEORADIUS Sicily 15 37 200 km STORE dst");
        run(&mut d, "TYPE dst");
        run(&mut d, "EXPIRE dst 100");
        run(&mut d, "GEORADIUS Sicily 15 37 300 km STORE dst");
        run(&mut d, "TTL dst");
        run(&mut d, "GEORADIUSBYMEMBER nokey x 1 km STORE dst");
        run(&mut d, "EXISTS dst");
        run(&mut d, "GEORADIUS Sicily 15 37 200 km STORE Sicily");
        run(&mut d, "ZRANGE Sicily 0 -1 WITHSCORES");
        // WRONGTYPE: the source's type is checked before any argument.
        run(&mut d, "SET str x");
        for line in [
            "GEOADD str 1 2 m",
            "GEOADD str bad 2 m",
            "GEODIST str a b",
            "GEODIST str a b parsec",
            "GEOHASH str a",
            "GEOHASH str",
            "GEOPOS str a",
            "GEORADIUS str bad 2 1 km",
            "GEORADIUS_RO str 1 2 1 km",
            "GEORADIUSBYMEMBER str m 1 km",
            "GEORADIUSBYMEMBER_RO str m 1 km STORE x",
            "GEOSEARCH str FROMMEMBER m BYRADIUS 1 km",
            "GEOSEARCH str bogus",
            "GEOSEARCHSTORE d str FROMLONLAT 1 2 BYRADIUS 1 km",
            "GEORADIUS Sicily 15 37 200 km STORE str",
        ] {
            run(&mut d, line);
        }
        run(&mut d, "GET str");
        run(
            &mut d,
            "GEOSEARCHSTORE str Sicily FROMLONLAT 15 37 BYRADIUS 200 km",
        );
        run(&mut d, "TYPE str");
    }
}

/// Many members at one point: equal distances, so COUNT's partial sort must arrange ties as
/// Redis's pqsort does, and a full sort must keep the scan order (glibc's stable qsort).
#[test]
fn ties_sort_like_redis() {
    let mut d = Diff::new();
    for proto in ["2", "3"] {
        if proto == "3" {
            hello3(&mut d);
        }
        run(&mut d, "FLUSHALL");
        for (key, n) in [("small", 60), ("big", 300)] {
            for i in 0..n {
                let (lon, lat) = match i % 3 {
                    0 => ("10", "10"),
                    1 => ("10.001", "10"),
                    _ => ("9.999", "10"),
                };
                d.run(&["GEOADD", key, lon, lat, &format!("m{:03}", (i * 37) % n)]);
            }
            for count in ["1", "2", "5", "7", "8", "39", "41", "100", "299", "1000"] {
                for order in ["ASC", "DESC"] {
                    run(&mut d, &format!("GEOSEARCH {key} FROMLONLAT 10 10 BYRADIUS 1 km {order} COUNT {count} WITHDIST"));
                }
                run(
                    &mut d,
                    &format!("GEOSEARCH {key} FROMLONLAT 10 10 BYRADIUS 1 km COUNT {count} ANY"),
                );
                run(
                    &mut d,
                    &format!("GEORADIUS {key} 10.0005 10 1 km COUNT {count} STOREDIST out"),
                );
                run(&mut d, "ZRANGE out 0 -1 WITHSCORES");
            }
            run(
                &mut d,
                &format!("GEOSEARCH {key} FROMLONLAT 10 10 BYRADIUS 1 km DESC"),
            );
            run(
                &mut d,
                &format!("GEOSEARCH {key} FROMLONLAT 10 10 BYRADIUS 1 km ASC"),
            );
        }
    }
}

/// Random points (near the poles' latitude limits and the antimeridian too) and random searches
/// by radius and box with random options, over both sorted-set encodings.
#[test]
fn random_points_and_searches_match_redis() {
    let mut d = Diff::new();
    let mut r = Lcg(2024);
    const UNITS: [&str; 6] = ["m", "km", "mi", "ft", "KM", "Mi"];
    for (round, points) in [(0, 40u64), (1, 400), (2, 3000)] {
        if round == 1 {
            hello3(&mut d);
        }
        run(&mut d, "FLUSHALL");
        let mut names = Vec::new();
        let mut cmd: Vec<String> = vec!["GEOADD".into(), "pts".into()];
        for i in 0..points {
            let name = format!("p{i}");
            cmd.push(r.lon());
            cmd.push(r.lat());
            cmd.push(name.clone());
            names.push(name);
            if cmd.len() > 600 {
                d.run(&cmd);
                cmd.truncate(2);
            }
        }
        if cmd.len() > 2 {
            d.run(&cmd);
        }
        run(&mut d, "OBJECT ENCODING pts");
        let pick_name = |r: &mut Lcg| names[r.below(names.len() as u64) as usize].clone();
        for _ in 0..10 {
            let (a, b) = (pick_name(&mut r), pick_name(&mut r));
            let unit = r.pick(&UNITS);
            run(&mut d, &format!("GEODIST pts {a} {b} {unit}"));
            run(&mut d, &format!("GEOPOS pts {a} {b}"));
            run(&mut d, &format!("GEOHASH pts {a} {b}"));
        }
        for step in 0..400 {
            // Radii from a meter to around the globe, in a random unit.
            let scale = [1.0, 10.0, 1e3, 1e4, 1e5, 1e6, 5e6, 2e7][r.below(8) as usize];
            let unit = r.pick(&UNITS);
            let per = match unit.to_ascii_lowercase().as_str() {
                "km" => 1000.0,
                "mi" => 1609.34,
                "ft" => 0.3048,
                _ => 1.0,
            };
            let size = |r: &mut Lcg| format!("{:.3}", r.between(0.0, scale) / per);
            let mut c: Vec<String> = Vec::new();
            let store = step % 5 == 4;
            let by_member = r.below(3) == 0;
            let (lon, lat) = (r.lon(), r.lat());
            match r.below(3) {
                0 if !store => {
                    c.push("GEOSEARCH".into());
                    c.push("pts".into());
                }
                0 | 1 if store => {
                    c.extend(["GEOSEARCHSTORE".into(), "dst".into(), "pts".into()]);
                }
                1 => {
                    c.push("GEOSEARCH".into());
                    c.push("pts".into());
                }
                _ => {
                    // GEORADIUS / GEORADIUSBYMEMBER (and _RO when not storing).
                    let ro = if store || r.below(2) == 0 { "" } else { "_RO" };
                    if by_member {
                        c.extend([
                            format!("GEORADIUSBYMEMBER{ro}"),
                            "pts".into(),
                            pick_name(&mut r),
                        ]);
                    } else {
                        c.extend([
                            format!("GEORADIUS{ro}"),
                            "pts".into(),
                            lon.clone(),
                            lat.clone(),
                        ]);
                    }
                    c.push(size(&mut r));
                    c.push(unit.into());
                }
            }
            let search = c[0].starts_with("GEOSEARCH");
            if search {
                if by_member {
                    c.extend(["FROMMEMBER".into(), pick_name(&mut r)]);
                } else {
                    c.extend(["FROMLONLAT".into(), lon, lat]);
                }
                if r.below(2) == 0 {
                    c.extend(["BYRADIUS".into(), size(&mut r), unit.into()]);
                } else {
                    c.extend(["BYBOX".into(), size(&mut r), size(&mut r), unit.into()]);
                }
            }
            match r.below(3) {
                0 => c.push("ASC".into()),
                1 => c.push("DESC".into()),
                _ => {}
            }
            if r.below(2) == 0 {
                c.extend(["COUNT".into(), (1 + r.below(30)).to_string()]);
                if r.below(3) == 0 {
                    c.push("ANY".into());
                }
            }
            if store {
                if search {
                    if r.below(2) == 0 {
                        c.push("STOREDIST".into());
                    }
                } else {
                    c.push(
                        if r.below(2) == 0 {
                            "STORE"
                        } else {
                            "STOREDIST"
                        }
                        .into(),
                    );
                    c.push("dst".into());
                }
            } else {
                for opt in ["WITHCOORD", "WITHDIST", "WITHHASH"] {
                    if r.below(2) == 0 {
                        c.push(opt.into());
                    }
                }
            }
            d.run(&c);
            if store {
                run(&mut d, "ZRANGE dst 0 -1 WITHSCORES");
            }
        }
    }
}

/// GEOSEARCHSTORE and GEORADIUS … STORE with source and destination on different shards, and
/// GEOADD/GEOSEARCH routed to every shard.
#[test]
fn store_across_shards_matches_redis() {
    let mut d = Diff::with_threads(4);
    for proto in ["2", "3"] {
        if proto == "3" {
            hello3(&mut d);
        }
        run(&mut d, "FLUSHALL");
        let srcs: Vec<String> = (0..4).map(|q| key_in(q, "src")).collect();
        let dsts: Vec<String> = (0..4).map(|q| key_in(q, "dst")).collect();
        for (i, s) in srcs.iter().enumerate() {
            for j in 0..30 {
                let lon = format!("{:.4}", -10.0 + (i * 30 + j) as f64 * 0.37);
                let lat = format!("{:.4}", 40.0 + ((j * 7) % 11) as f64 * 0.21);
                d.run(&["GEOADD", s, &lon, &lat, &format!("m{j}")]);
            }
        }
        for s in &srcs {
            for t in &dsts {
                run(
                    &mut d,
                    &format!("GEOSEARCHSTORE {t} {s} FROMMEMBER m3 BYRADIUS 300 km COUNT 12"),
                );
                run(&mut d, &format!("ZRANGE {t} 0 -1 WITHSCORES"));
                run(
                    &mut d,
                    &format!(
                        "GEOSEARCHSTORE {t} {s} FROMLONLAT 0 41 BYBOX 2000 500 km STOREDIST DESC"
                    ),
                );
                run(&mut d, &format!("ZRANGE {t} 0 -1 WITHSCORES"));
                run(&mut d, &format!("GEORADIUS {s} 0 41 500 km STORE {t} ASC"));
                run(&mut d, &format!("ZRANGE {t} 0 -1 WITHSCORES"));
                run(
                    &mut d,
                    &format!("GEORADIUSBYMEMBER {s} m9 200 mi STOREDIST {t}"),
                );
                run(&mut d, &format!("ZRANGE {t} 0 -1 WITHSCORES"));
                run(&mut d, &format!("GEORADIUS {s} 120 -41 1 km STORE {t}"));
                run(&mut d, &format!("EXISTS {t}"));
                run(&mut d, &format!("SET {t} x"));
                run(
                    &mut d,
                    &format!("GEOSEARCHSTORE {t} nokey FROMLONLAT 0 0 BYRADIUS 1 m"),
                );
                run(&mut d, &format!("EXISTS {t}"));
            }
            run(
                &mut d,
                &format!("GEOSEARCH {s} FROMMEMBER m0 BYRADIUS 500 km WITHDIST"),
            );
        }
        let (s0, s1, d2, d3) = (&srcs[0], &srcs[1], &dsts[2], &dsts[3]);
        run(&mut d, &format!("SET {s1} x"));
        run(
            &mut d,
            &format!("GEOSEARCHSTORE {d2} {s1} FROMLONLAT 0 0 BYRADIUS 1 m"),
        );
        for line in [
            format!("GEORADIUS {s1} 1 2 3 m STORE"),
            format!("GEORADIUS {s0} 1 2 3 m STORE"),
            format!("GEORADIUS {s0} 1 2 3 m STORE {s1}"),
            format!("GEORADIUSBYMEMBER {s0} m1 3 km STOREDIST {s1} WITHDIST"),
            format!("GEOSEARCH {s1} FROMLONLAT 0 0 BYRADIUS 1 m"),
            format!("GEOPOS {s0} m1 m2 none"),
            format!("GEODIST {s0} m1 m2 km"),
        ] {
            run(&mut d, &line);
        }
        run(&mut d, &format!("GEORADIUS {s0} 0 41 500 km STORE {d3}"));
        run(&mut d, &format!("SET {d3} x"));
        run(&mut d, &format!("GEORADIUS {s0} 0 41 500 km STORE {d3}"));
        run(&mut d, &format!("TYPE {d3}"));
        // STORE repeated with different keys: Redis writes the last one (keys on other shards).
        let d1 = &dsts[1];
        run(&mut d, &format!("DEL {d1} {d2} {d3}"));
        run(
            &mut d,
            &format!("GEORADIUS {s0} 0 41 500 km STORE {d1} STORE {d2} STOREDIST {d3}"),
        );
        run(&mut d, &format!("ZRANGE {d3} 0 -1 WITHSCORES"));
        run(&mut d, &format!("EXISTS {d1} {d2}"));
        run(
            &mut d,
            &format!("GEORADIUSBYMEMBER {s0} m1 900 km STOREDIST {d2} STORE {d1}"),
        );
        run(&mut d, &format!("ZRANGE {d1} 0 -1 WITHSCORES"));
        run(
            &mut d,
            &format!("COMMAND GETKEYS GEORADIUS {s0} 0 41 5 km STORE {d1} STORE {d2}"),
        );
    }
}
