//! Key specs: where a command's keys are in its arguments and what the command does to them, in
//! Redis 7's model (`key_specs` in Redis's `src/commands/*.json`, served by COMMAND INFO).
//!
//! A command has a list of specs. Each spec finds a start (`begin_search`: a fixed index, or the
//! argument after a keyword searched from some position) and from there a run of keys (`find_keys`:
//! a range up to a last key with a step, or a count read from a `numkeys` argument), and says how
//! those keys are used (RO/RW/OW/RM plus access/update/insert/delete). Specs that cannot be resolved
//! from positions alone are `unknown` or flagged `incomplete` (SORT's STORE, MIGRATE's KEYS); such a
//! command also carries a [`GetKeys`] parser, as Redis carries a `getkeys_proc`.
//!
//! Invariants (checked by [`KeySpec::validate`] when the table is built): an index begins at 1 or
//! later; a range's step is at least 1 and a `limit` only goes with lastkey -1; a keynum's step is at
//! least 1 and its first key comes after the count; every spec says RO, RW, OW or RM (exactly one).
//!
//! Resolution follows Redis's `getKeysFromCommandWithSpecs`: the specs are used unless one of them
//! is unknown, incomplete or out of bounds for this command line, in which case the command's parser
//! decides (and without a parser the command has no keys on that line: its handler reports the
//! syntax error). Nothing here allocates.

use bytes::Bytes;

/// [`crate::table::PerKey`] for `CMD key [key ...] last` (BLPOP, BZPOPMIN: the keys run from the
/// first argument to the one before the last).
pub fn keys_before_last(args: &[Bytes], keep: &mut dyn FnMut(usize) -> bool) -> Vec<Bytes> {
    let last = args.len().saturating_sub(1).max(1);
    let mut out = Vec::with_capacity(args.len());
    out.push(args[0].clone());
    out.extend((1..last).filter(|&i| keep(i)).map(|i| args[i].clone()));
    out.extend(args[last..].iter().cloned());
    out
}

/// [`crate::table::PerKey`] for `CMD timeout numkeys key [key ...] rest...` (BLMPOP, BZMPOP): the
/// count is rewritten to the keys kept. A line whose count is not a valid number is returned as it
/// is (such a command never parks: its handler rejects it first).
pub fn numkeys_after_timeout(args: &[Bytes], keep: &mut dyn FnMut(usize) -> bool) -> Vec<Bytes> {
    let n = args
        .get(2)
        .and_then(|n| strata_core::num::parse_i64(n))
        .filter(|&n| n >= 0 && 3 + n as usize <= args.len());
    let Some(n) = n.map(|n| n as usize) else {
        return args.to_vec();
    };
    let kept: Vec<Bytes> = (3..3 + n)
        .filter(|&i| keep(i))
        .map(|i| args[i].clone())
        .collect();
    let mut out = Vec::with_capacity(args.len());
    out.push(args[0].clone());
    out.push(args[1].clone());
    out.push(Bytes::from(kept.len().to_string()));
    out.extend(kept);
    out.extend(args[3 + n..].iter().cloned());
    out
}

/// Redis's `genericGetKeys`, the [`GetKeys`] of the commands whose keys follow a count (ZUNION,
/// ZUNIONSTORE, SINTERCARD, LMPOP, BZMPOP…): the count at `COUNT` is read as C's `atoi` reads it
/// (`1.5` is 1), the keys start at `FIRST`, a destination at `STORE` (0: none) comes after them,
/// and every key is reported without flags. A count below 1 or past the arguments gives no keys.
/// The key spec decides whenever the count is a valid integer, so this only answers COMMAND GETKEYS
/// for a malformed count (the command itself rejects such a line), as Redis falls back to it.
pub fn counted_keys<const STORE: usize, const COUNT: usize, const FIRST: usize>(
    args: &[Bytes],
    found: &mut dyn FnMut(usize, KeyFlags),
) {
    let Some(count) = args.get(COUNT) else {
        return;
    };
    // `atoi` is `(int) strtol`: the cast keeps the low 32 bits.
    let n = crate::args::c_strtol(count) as i32;
    if n < 1 || n as usize > args.len().saturating_sub(FIRST) {
        return;
    }
    for i in FIRST..FIRST + n as usize {
        found(i, KeyFlags::default());
    }
    if STORE != 0 {
        found(STORE, KeyFlags::default());
    }
}

/// Key-spec flags, named as COMMAND INFO shows them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct KeyFlags(pub u16);

impl KeyFlags {
    /// Read-only: the value is read (or only its metadata), never changed.
    pub const RO: KeyFlags = KeyFlags(1 << 0);
    /// Read-write: the value is read and may be changed.
    pub const RW: KeyFlags = KeyFlags(1 << 1);
    /// Overwrite: the value is replaced without being read.
    pub const OW: KeyFlags = KeyFlags(1 << 2);
    /// Remove: the key is deleted.
    pub const RM: KeyFlags = KeyFlags(1 << 3);
    /// User data is returned (or derived from it).
    pub const ACCESS: KeyFlags = KeyFlags(1 << 4);
    /// Existing data is updated.
    pub const UPDATE: KeyFlags = KeyFlags(1 << 5);
    /// Data is added, nothing existing changes.
    pub const INSERT: KeyFlags = KeyFlags(1 << 6);
    /// Data is deleted.
    pub const DELETE: KeyFlags = KeyFlags(1 << 7);
    /// The argument is not a key, but routes like one (e.g. a channel in sharded pub/sub).
    pub const NOT_KEY: KeyFlags = KeyFlags(1 << 8);
    /// The spec may miss keys: the command's parser must be consulted.
    pub const INCOMPLETE: KeyFlags = KeyFlags(1 << 9);
    /// The flags depend on the arguments: the command's parser tells the exact ones.
    pub const VARIABLE_FLAGS: KeyFlags = KeyFlags(1 << 10);

    /// COMMAND INFO / GETKEYSANDFLAGS order and spelling.
    const NAMES: [(KeyFlags, &'static str); 11] = [
        (KeyFlags::RO, "RO"),
        (KeyFlags::RW, "RW"),
        (KeyFlags::OW, "OW"),
        (KeyFlags::RM, "RM"),
        (KeyFlags::ACCESS, "access"),
        (KeyFlags::UPDATE, "update"),
        (KeyFlags::INSERT, "insert"),
        (KeyFlags::DELETE, "delete"),
        (KeyFlags::NOT_KEY, "not_key"),
        (KeyFlags::INCOMPLETE, "incomplete"),
        (KeyFlags::VARIABLE_FLAGS, "variable_flags"),
    ];

    /// Union (usable in `const` table entries).
    pub const fn or(self, other: KeyFlags) -> KeyFlags {
        KeyFlags(self.0 | other.0)
    }

    /// True if every flag of `other` is set.
    pub const fn has(self, other: KeyFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Flag names as COMMAND INFO shows them, in Redis's order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Self::NAMES
            .into_iter()
            .filter(move |(f, _)| self.has(*f))
            .map(|(_, n)| n)
    }

    /// What the key's holder needs: only RO keys are read; RW, OW and RM keys are written.
    pub const fn access(self) -> KeyAccess {
        if self.0 & (KeyFlags::RW.0 | KeyFlags::OW.0 | KeyFlags::RM.0) != 0 {
            KeyAccess::Write
        } else {
            KeyAccess::Read
        }
    }
}

/// Whether a command only reads a key or may change it (what a key lock must exclude).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyAccess {
    Read,
    Write,
}

/// Where a spec's search for keys begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BeginSearch {
    /// At this argument index (the command name is index 0).
    Index(u32),
    /// One past the first argument equal (case-insensitively) to `keyword`, searched from
    /// `startfrom` towards the end (> 0) or from `argc + startfrom` towards the start (< 0).
    Keyword {
        keyword: &'static str,
        startfrom: i32,
    },
    /// Cannot be told from positions (the command's [`GetKeys`] parser knows).
    Unknown,
}

/// How a spec finds its keys from where the search began.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FindKeys {
    /// Keys from the start to `lastkey` (relative to the start if >= 0; from the end if < 0,
    /// -1 = last argument), every `step` arguments. With `limit` > 0 (and lastkey -1), the range
    /// ends after 1/limit of the remaining arguments (XREAD's STREAMS k1 k2 id1 id2: limit 2).
    Range { lastkey: i32, step: u32, limit: u32 },
    /// The argument at start + `keynumidx` holds the number of keys; they begin at start +
    /// `firstkey`, every `step` arguments (ZUNIONSTORE, EVAL, LMPOP).
    Keynum {
        keynumidx: u32,
        firstkey: u32,
        step: u32,
    },
    /// Cannot be told from positions.
    Unknown,
}

/// One key spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeySpec {
    pub flags: KeyFlags,
    pub begin_search: BeginSearch,
    pub find_keys: FindKeys,
    /// Redis's explanatory note, shown by COMMAND INFO ("" = none).
    pub notes: &'static str,
}

/// A command's own key finder, for specs that positions cannot express (Redis's `getkeys_proc`):
/// calls the callback with (argument index, flags) for each key of `args` (args[0] is the command
/// name), in argument order; reports nothing for a line it cannot parse.
pub type GetKeys = fn(args: &[Bytes], found: &mut dyn FnMut(usize, KeyFlags));

/// The key arguments one spec designates on one command line: `first..=last` every `step`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    first: usize,
    last: usize,
    step: usize,
}

/// Why a spec cannot be used on a command line (the parser, if any, decides instead).
struct Unresolved;

impl KeySpec {
    /// One key at argument `index`.
    pub const fn at(index: u32, flags: KeyFlags) -> KeySpec {
        KeySpec {
            flags,
            begin_search: BeginSearch::Index(index),
            find_keys: FindKeys::Range {
                lastkey: 0,
                step: 1,
                limit: 0,
            },
            notes: "",
        }
    }

    /// Keys from argument `index` to `lastkey` (see [`FindKeys::Range`]) every `step`.
    pub const fn range(index: u32, lastkey: i32, step: u32, flags: KeyFlags) -> KeySpec {
        KeySpec {
            find_keys: FindKeys::Range {
                lastkey,
                step,
                limit: 0,
            },
            ..KeySpec::at(index, flags)
        }
    }

    /// A spec searched by `keyword` from `startfrom`, finding keys as `find_keys` says.
    pub const fn keyword(
        keyword: &'static str,
        startfrom: i32,
        find_keys: FindKeys,
        flags: KeyFlags,
    ) -> KeySpec {
        KeySpec {
            flags,
            begin_search: BeginSearch::Keyword { keyword, startfrom },
            find_keys,
            notes: "",
        }
    }

    /// Keys counted by a `numkeys` argument at `index` (keys follow it, one per argument).
    pub const fn numkeys(index: u32, flags: KeyFlags) -> KeySpec {
        KeySpec {
            flags,
            begin_search: BeginSearch::Index(index),
            find_keys: FindKeys::Keynum {
                keynumidx: 0,
                firstkey: 1,
                step: 1,
            },
            notes: "",
        }
    }

    /// A spec whose keys only the command's parser can find.
    pub const fn unknown(flags: KeyFlags) -> KeySpec {
        KeySpec {
            flags,
            begin_search: BeginSearch::Unknown,
            find_keys: FindKeys::Unknown,
            notes: "",
        }
    }

    /// The same spec with Redis's note.
    pub const fn with_notes(self, notes: &'static str) -> KeySpec {
        KeySpec { notes, ..self }
    }

    /// The key arguments of this spec on `args`: Ok(None) when its keyword is absent (no keys),
    /// Err when positions cannot tell (unknown, incomplete, or out of bounds for this line).
    fn span(&self, args: &[Bytes]) -> Result<Option<Span>, Unresolved> {
        let argc = args.len() as i64;
        let first = match self.begin_search {
            BeginSearch::Index(i) => i as i64,
            BeginSearch::Keyword { keyword, startfrom } => {
                // Redis never looks at argument 0 nor, searching forwards, at the last argument
                // (a keyword there could have no key after it).
                let found = if startfrom > 0 {
                    (startfrom as i64..argc - 1).find(|&i| matches(&args[i as usize], keyword))
                } else {
                    (2..=argc + startfrom as i64)
                        .rev()
                        .find(|&i| i < argc && matches(&args[i as usize], keyword))
                };
                match found {
                    Some(i) => i + 1,
                    None => return Ok(None),
                }
            }
            BeginSearch::Unknown => return Err(Unresolved),
        };
        let (first, last, step) = match self.find_keys {
            FindKeys::Range {
                lastkey,
                step,
                limit,
            } => {
                let last = if lastkey >= 0 {
                    first + lastkey as i64
                } else if limit == 0 {
                    argc + lastkey as i64
                } else {
                    first + ((argc - first) / limit as i64 + lastkey as i64)
                };
                (first, last, step as i64)
            }
            FindKeys::Keynum {
                keynumidx,
                firstkey,
                step,
            } => {
                let at = first + keynumidx as i64;
                let count = args
                    .get(at as usize)
                    .and_then(|a| std::str::from_utf8(a).ok())
                    .and_then(|s| s.parse::<i64>().ok())
                    .filter(|&n| n >= 0 && at < argc)
                    .ok_or(Unresolved)?;
                // Redis takes the count as an `int` (4294967297 is 1; 2^31 is negative and fails
                // the bound check below).
                let count = i64::from(count as i32);
                let first = first + firstkey as i64;
                // A client's count may be anything up to i64::MAX: saturate, the bound check
                // below rejects it.
                (first, first.saturating_add(count) - 1, step as i64)
            }
            FindKeys::Unknown => return Err(Unresolved),
        };
        if first >= argc || last >= argc || last < first || self.flags.has(KeyFlags::INCOMPLETE) {
            return Err(Unresolved);
        }
        Ok(Some(Span {
            first: first as usize,
            last: last as usize,
            step: step.max(1) as usize,
        }))
    }

    /// Checks the spec's own consistency; `Err` names the problem (the table panics with it).
    pub fn validate(&self) -> Result<(), &'static str> {
        let f = self.flags;
        let kinds = [KeyFlags::RO, KeyFlags::RW, KeyFlags::OW, KeyFlags::RM]
            .iter()
            .filter(|k| f.has(**k))
            .count();
        // A NOT_KEY spec (SPUBLISH's shard channel) names no key, so it has no access kind.
        if kinds != 1 && !(kinds == 0 && f.has(KeyFlags::NOT_KEY)) {
            return Err("a key spec says exactly one of RO, RW, OW, RM");
        }
        match self.begin_search {
            BeginSearch::Index(0) => return Err("a key spec cannot begin at the command name"),
            BeginSearch::Keyword { keyword, startfrom } if keyword.is_empty() || startfrom == 0 => {
                return Err("a keyword search needs a keyword and a non-zero startfrom")
            }
            _ => {}
        }
        match self.find_keys {
            FindKeys::Range {
                lastkey,
                step,
                limit,
            } => {
                if step == 0 {
                    return Err("a key range has a step of at least 1");
                }
                if limit != 0 && lastkey != -1 {
                    return Err("a key range limit only goes with lastkey -1");
                }
            }
            FindKeys::Keynum {
                keynumidx,
                firstkey,
                step,
            } => {
                if step == 0 || firstkey <= keynumidx {
                    return Err("numkeys keys follow the count, with a step of at least 1");
                }
            }
            FindKeys::Unknown => {}
        }
        Ok(())
    }
}

fn matches(arg: &[u8], keyword: &str) -> bool {
    crate::args::eq_ci(arg, keyword)
}

/// Key resolution for a whole command: its specs plus its optional parser.
#[derive(Clone, Copy)]
pub struct Keys<'a> {
    pub specs: &'a [KeySpec],
    pub getkeys: Option<GetKeys>,
}

impl Keys<'_> {
    /// True if the command can have keys at all (COMMAND GETKEYS's "no key arguments" test).
    pub fn any(&self) -> bool {
        self.getkeys.is_some() || self.specs.iter().any(|s| !s.flags.has(KeyFlags::NOT_KEY))
    }

    /// The specs that designate keys (NOT_KEY ones only route).
    fn keyed(&self) -> impl Iterator<Item = &KeySpec> + '_ {
        self.specs
            .iter()
            .filter(|s| !s.flags.has(KeyFlags::NOT_KEY))
    }

    /// The key of a command whose only spec is one fixed position (most commands: GET, LPUSH,
    /// ZPOPMIN...), when `args` reaches it: what [`KeySpec::span`] finds, without its general walk
    /// (this runs for every command, several times).
    fn fixed(&self, args: &[Bytes]) -> Option<(usize, KeyFlags)> {
        let [s] = self.specs else { return None };
        match (s.begin_search, s.find_keys) {
            (BeginSearch::Index(i), FindKeys::Range { lastkey: 0, .. })
                if (i as usize) < args.len()
                    && !s.flags.has(KeyFlags::NOT_KEY)
                    && !s.flags.has(KeyFlags::INCOMPLETE) =>
            {
                Some((i as usize, s.flags))
            }
            _ => None,
        }
    }

    /// True when positions alone find this line's keys: there are key specs and each resolves.
    fn positional(&self, args: &[Bytes]) -> bool {
        self.keyed().next().is_some() && self.keyed().all(|s| s.span(args).is_ok())
    }

    /// Calls `f(index, flags)` for every key of `args` in spec order. `exact_flags` asks for the
    /// parser's flags when a spec's flags vary with the arguments (GETKEYSANDFLAGS); without it
    /// the declared flags (the worst case) are reported. Returns the number of keys reported.
    #[inline]
    pub fn each(
        &self,
        args: &[Bytes],
        exact_flags: bool,
        mut f: impl FnMut(usize, KeyFlags),
    ) -> usize {
        if let Some((i, flags)) = self.fixed(args) {
            if !(exact_flags && flags.has(KeyFlags::VARIABLE_FLAGS) && self.getkeys.is_some()) {
                f(i, flags);
                return 1;
            }
        }
        let variable = self.keyed().any(|s| s.flags.has(KeyFlags::VARIABLE_FLAGS));
        let mut n = 0;
        if self.positional(args) && !(exact_flags && variable && self.getkeys.is_some()) {
            for spec in self.keyed() {
                if let Ok(Some(span)) = spec.span(args) {
                    for i in (span.first..=span.last).step_by(span.step) {
                        f(i, spec.flags);
                        n += 1;
                    }
                }
            }
        } else if let Some(parse) = self.getkeys {
            parse(args, &mut |i, flags| {
                f(i, flags);
                n += 1;
            });
        }
        n
    }

    /// The index of the first key of `args`, if any.
    pub fn first(&self, args: &[Bytes]) -> Option<usize> {
        if let Some((i, _)) = self.fixed(args) {
            return Some(i);
        }
        if self.positional(args) {
            return self
                .keyed()
                .find_map(|s| s.span(args).ok().flatten().map(|span| span.first));
        }
        let mut first = None;
        if let Some(parse) = self.getkeys {
            parse(args, &mut |i, _| {
                first.get_or_insert(i);
            });
        }
        first
    }

    /// Redis's legacy (first, last, step) triple for COMMAND INFO, derived as Redis derives it:
    /// from the index/range specs with step 1 that follow each other (all of them if there is just
    /// one such spec), (0, 0, 0) if there are none. The second value is true when the legacy triple
    /// does not tell every key (Redis's `movablekeys` flag).
    pub fn legacy_range(&self) -> ((i64, i64, i64), bool) {
        let plain = |s: &KeySpec| match (s.begin_search, s.find_keys) {
            (BeginSearch::Index(pos), FindKeys::Range { lastkey, step, .. }) => {
                Some((pos as i64, lastkey as i64, step as i64))
            }
            _ => None,
        };
        if let [only] = self.specs {
            if let Some((pos, lastkey, step)) = plain(only) {
                let last = if lastkey < 0 { lastkey } else { pos + lastkey };
                return ((pos, last, step), only.flags.has(KeyFlags::INCOMPLETE));
            }
        }
        let mut movable = false;
        let (mut first, mut last) = (i64::MAX, None::<i64>);
        for s in self.specs {
            let Some((pos, lastkey, step)) = plain(s) else {
                movable = true;
                continue;
            };
            if step != 1 || last.is_some_and(|l| l != pos - 1) {
                movable = true;
                continue;
            }
            movable |= s.flags.has(KeyFlags::INCOMPLETE);
            first = first.min(pos);
            let abs = if lastkey >= 0 { lastkey + pos } else { lastkey };
            // Redis compares last keys unsigned: one counted from the end (< 0) is beyond every
            // fixed one, and -1 beyond -2.
            last = Some(match last {
                Some(l) if (l as u32) > (abs as u32) => l,
                _ => abs,
            });
        }
        match last {
            Some(last) => ((first, last, 1), movable),
            None => ((0, 0, 0), true),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &str) -> Vec<Bytes> {
        words
            .split(' ')
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    fn words(args: &[Bytes]) -> String {
        let w: Vec<&str> = args
            .iter()
            .map(|a| std::str::from_utf8(a).unwrap())
            .collect();
        w.join(" ")
    }

    #[test]
    fn a_per_key_line_keeps_the_chosen_keys_and_everything_else() {
        let l = argv("BLPOP k1 k2 k3 k4 0.5");
        let mut even = |i: usize| l[i].last().is_some_and(|b| b % 2 == 0);
        assert_eq!(words(&keys_before_last(&l, &mut even)), "BLPOP k2 k4 0.5");
        let l = argv("BLMPOP 0 4 k1 k2 k3 k4 LEFT COUNT 2");
        let mut even = |i: usize| l[i].last().is_some_and(|b| b % 2 == 0);
        assert_eq!(
            words(&numkeys_after_timeout(&l, &mut even)),
            "BLMPOP 0 2 k2 k4 LEFT COUNT 2"
        );
        // A count that does not fit the line leaves it as it is.
        for bad in [
            "BZMPOP 0 9 k1 MIN",
            "BZMPOP 0 x k1 MIN",
            "BZMPOP 0 -1 k1 MIN",
        ] {
            assert_eq!(
                words(&numkeys_after_timeout(&argv(bad), &mut |_| true)),
                bad
            );
        }
    }

    const RO: KeyFlags = KeyFlags::RO;
    const RW: KeyFlags = KeyFlags::RW;
    const OW: KeyFlags = KeyFlags::OW;
    const ACCESS: KeyFlags = KeyFlags::ACCESS;
    const UPDATE: KeyFlags = KeyFlags::UPDATE;
    const DELETE: KeyFlags = KeyFlags::DELETE;

    fn line(s: &str) -> Vec<Bytes> {
        s.split(' ')
            .map(|a| Bytes::copy_from_slice(a.as_bytes()))
            .collect()
    }

    /// The keys of `cmd` as (argument, flag names) pairs.
    fn keys(k: Keys<'_>, cmd: &str, exact: bool) -> Vec<(String, String)> {
        let args = line(cmd);
        let mut out = Vec::new();
        k.each(&args, exact, |i, f| {
            out.push((
                String::from_utf8_lossy(&args[i]).into_owned(),
                f.names().collect::<Vec<_>>().join(" "),
            ))
        });
        out
    }

    fn names(k: Keys<'_>, cmd: &str) -> Vec<String> {
        keys(k, cmd, false).into_iter().map(|(k, _)| k).collect()
    }

    fn specs(specs: &[KeySpec]) -> Keys<'_> {
        Keys {
            specs,
            getkeys: None,
        }
    }

    // The specs below are Redis 7.0's, as its COMMAND INFO shows them, for commands Strata does not
    // implement yet: they show the model and the extractor cover every key position form.

    /// XREAD [COUNT n] [BLOCK ms] STREAMS key [key ...] id [id ...]: keyword, then half the rest.
    const XREAD: &[KeySpec] = &[KeySpec::keyword(
        "STREAMS",
        1,
        FindKeys::Range {
            lastkey: -1,
            step: 1,
            limit: 2,
        },
        RO.or(ACCESS),
    )];

    /// ZUNIONSTORE destination numkeys key [key ...] [WEIGHTS ...]: a fixed key, then numkeys.
    const ZUNIONSTORE: &[KeySpec] = &[
        KeySpec::at(1, OW.or(UPDATE)),
        KeySpec::numkeys(2, RO.or(ACCESS)),
    ];

    /// EVAL script numkeys [key ...] [arg ...].
    const EVAL: &[KeySpec] = &[KeySpec::numkeys(2, RW.or(ACCESS).or(UPDATE)).with_notes(
        "We cannot tell how the keys will be used so we assume the worst, RW and UPDATE",
    )];

    /// LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count].
    const LMPOP: &[KeySpec] = &[KeySpec::numkeys(1, RW.or(ACCESS).or(DELETE))];

    /// MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH ...] [KEYS key ...]:
    /// the KEYS spec searches backwards and is incomplete (a key could be named KEYS).
    const MIGRATE: &[KeySpec] = &[
        KeySpec::at(3, RW.or(ACCESS).or(DELETE)),
        KeySpec::keyword(
            "KEYS",
            -2,
            FindKeys::Range {
                lastkey: -1,
                step: 1,
                limit: 0,
            },
            RW.or(ACCESS).or(DELETE).or(KeyFlags::INCOMPLETE),
        ),
    ];

    /// SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA] [STORE dst].
    const SORT: &[KeySpec] = &[
        KeySpec::at(1, RO.or(ACCESS)),
        KeySpec::unknown(RO.or(ACCESS)).with_notes(
            "For the optional BY/GET keyword. It is marked 'unknown' because the key names derive from the content of the key we sort",
        ),
        KeySpec::unknown(OW.or(UPDATE)).with_notes(
            "For the optional STORE keyword. It is marked 'unknown' because the keyword can appear anywhere in the argument array",
        ),
    ];

    /// SORT's parser, as a command would supply it: the key, then the last STORE's destination.
    fn sort_keys(args: &[Bytes], found: &mut dyn FnMut(usize, KeyFlags)) {
        found(1, RO.or(ACCESS));
        let mut i = 2;
        let mut store = None;
        while i < args.len() {
            let skip = match crate::args::c_string(&args[i])
                .to_ascii_lowercase()
                .as_slice()
            {
                b"limit" => 2,
                b"by" | b"get" => 1,
                b"store" => {
                    store = Some(i + 1);
                    1
                }
                _ => 0,
            };
            i += 1 + skip;
        }
        if let Some(d) = store.filter(|&d| d < args.len()) {
            found(d, OW.or(UPDATE));
        }
    }

    /// MIGRATE's parser: the single key, or the keys after KEYS when the key argument is empty.
    fn migrate_keys(args: &[Bytes], found: &mut dyn FnMut(usize, KeyFlags)) {
        let flags = RW.or(ACCESS).or(DELETE);
        if args.len() > 3 && args[3].is_empty() {
            if let Some(k) = args.iter().skip(6).position(|a| matches(a, "keys")) {
                (7 + k..args.len()).for_each(|i| found(i, flags));
            }
        } else if args.len() > 3 {
            found(3, flags);
        }
    }

    #[test]
    fn keyword_with_limit_takes_half_of_the_rest() {
        let k = specs(XREAD);
        assert_eq!(names(k, "XREAD STREAMS a b 0 0"), ["a", "b"]);
        assert_eq!(names(k, "xread COUNT 2 streams a 0"), ["a"]);
        assert_eq!(
            names(k, "XREAD BLOCK 0 STREAMS a b c 1 2 3"),
            ["a", "b", "c"]
        );
        // No STREAMS keyword: no keys (the command reports the syntax error).
        assert!(names(k, "XREAD COUNT 2").is_empty());
        assert_eq!(k.legacy_range(), ((0, 0, 0), true));
    }

    #[test]
    fn numkeys_after_a_fixed_key() {
        let k = specs(ZUNIONSTORE);
        assert_eq!(
            keys(k, "ZUNIONSTORE d 2 a b WEIGHTS 1 2", false),
            [
                ("d".into(), "OW update".into()),
                ("a".into(), "RO access".into()),
                ("b".into(), "RO access".into())
            ]
        );
        // A bad or excessive count, or none at all: positions cannot tell, so no keys.
        for bad in [
            "ZUNIONSTORE d x a",
            "ZUNIONSTORE d 3 a b",
            "ZUNIONSTORE d -1 a",
            "ZUNIONSTORE d 0 a",
        ] {
            assert!(names(k, bad).is_empty(), "{bad}");
        }
        assert_eq!(k.legacy_range(), ((1, 1, 1), true));
    }

    #[test]
    fn numkeys_forms_of_eval_and_lmpop() {
        assert_eq!(names(specs(EVAL), "EVAL s 2 k1 k2 a1"), ["k1", "k2"]);
        assert!(names(specs(EVAL), "EVAL s 0 a1").is_empty());
        assert_eq!(specs(EVAL).legacy_range(), ((0, 0, 0), true));
        assert_eq!(names(specs(LMPOP), "LMPOP 2 a b LEFT COUNT 3"), ["a", "b"]);
        assert!(names(specs(LMPOP), "LMPOP 3 a b").is_empty());
    }

    #[test]
    fn incomplete_keyword_spec_defers_to_the_parser() {
        let with_parser = Keys {
            specs: MIGRATE,
            getkeys: Some(migrate_keys),
        };
        assert_eq!(names(with_parser, "MIGRATE h 1 k 0 5"), ["k"]);
        assert_eq!(
            names(with_parser, "MIGRATE h 1  0 5 REPLACE KEYS a b"),
            ["a", "b"]
        );
        // Positions alone give up on the incomplete spec (no parser: no keys).
        assert!(names(specs(MIGRATE), "MIGRATE h 1  0 5 KEYS a b").is_empty());
        assert_eq!(specs(MIGRATE).legacy_range(), ((3, 3, 1), true));
    }

    #[test]
    fn unknown_specs_defer_to_the_parser() {
        let sort = Keys {
            specs: SORT,
            getkeys: Some(sort_keys),
        };
        assert_eq!(
            keys(sort, "SORT k BY w_* LIMIT 0 1 STORE d", false),
            [
                ("k".into(), "RO access".into()),
                ("d".into(), "OW update".into())
            ]
        );
        assert_eq!(names(sort, "SORT k ALPHA"), ["k"]);
        assert_eq!(sort.legacy_range(), ((1, 1, 1), true));
    }

    #[test]
    fn fixed_positions_and_legacy_triples() {
        let mset = [KeySpec::range(1, -1, 2, OW.or(UPDATE))];
        assert_eq!(names(specs(&mset), "MSET a 1 b 2"), ["a", "b"]);
        assert_eq!(specs(&mset).legacy_range(), ((1, -1, 2), false));
        let rename = [
            KeySpec::at(1, RW.or(ACCESS).or(DELETE)),
            KeySpec::at(2, OW.or(UPDATE)),
        ];
        assert_eq!(
            keys(specs(&rename), "RENAME a b", false),
            [
                ("a".into(), "RW access delete".into()),
                ("b".into(), "OW update".into())
            ]
        );
        assert_eq!(specs(&rename).legacy_range(), ((1, 2, 1), false));
        let object = [KeySpec::at(2, RO)];
        assert_eq!(names(specs(&object), "OBJECT ENCODING k"), ["k"]);
        assert_eq!(specs(&object).legacy_range(), ((2, 2, 1), false));
        assert_eq!(specs(&[]).legacy_range(), ((0, 0, 0), true));
        assert!(!specs(&[]).any());
    }

    #[test]
    fn variable_flags_come_from_the_parser_only_when_asked() {
        const SET: &[KeySpec] = &[KeySpec::at(
            1,
            RW.or(ACCESS).or(UPDATE).or(KeyFlags::VARIABLE_FLAGS),
        )];
        fn set_keys(args: &[Bytes], found: &mut dyn FnMut(usize, KeyFlags)) {
            let get = args.iter().skip(3).any(|a| matches(a, "get"));
            found(
                1,
                if get {
                    RW.or(ACCESS).or(UPDATE)
                } else {
                    OW.or(UPDATE)
                },
            );
        }
        let k = Keys {
            specs: SET,
            getkeys: Some(set_keys),
        };
        assert_eq!(keys(k, "SET k v", true), [("k".into(), "OW update".into())]);
        assert_eq!(
            keys(k, "SET k v GET", true),
            [("k".into(), "RW access update".into())]
        );
        assert_eq!(
            keys(k, "SET k v", false),
            [("k".into(), "RW access update variable_flags".into())]
        );
    }

    #[test]
    fn access_follows_the_kind_of_use() {
        assert_eq!(RO.or(ACCESS).access(), KeyAccess::Read);
        for f in [RW, OW, KeyFlags::RM] {
            assert_eq!(f.access(), KeyAccess::Write);
        }
    }

    #[test]
    fn validation_rejects_impossible_specs() {
        assert!(KeySpec::at(0, RO).validate().is_err());
        assert!(KeySpec::at(1, RO.or(RW)).validate().is_err());
        assert!(KeySpec::at(1, ACCESS).validate().is_err());
        assert!(KeySpec::range(1, -1, 0, RO).validate().is_err());
        assert!(KeySpec::keyword("", 1, FindKeys::Unknown, RO)
            .validate()
            .is_err());
        for s in XREAD
            .iter()
            .chain(ZUNIONSTORE)
            .chain(EVAL)
            .chain(MIGRATE)
            .chain(SORT)
        {
            assert_eq!(s.validate(), Ok(()));
        }
    }
}
