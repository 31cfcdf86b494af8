//! The command table: one declarative entry per command, the single source for dispatch, arity and
//! key positions, `COMMAND` replies, ACL categories and the support matrix in docs/commands.md.

use std::collections::HashMap;

use bytes::Bytes;

use futures_util::future::LocalBoxFuture;

use crate::ctx::{ConnCtx, ShardCtx};
use crate::error::CmdResult;
use crate::keyed::KeysHandler;
pub use crate::keyspec::{BeginSearch, FindKeys, GetKeys, KeyAccess, KeyFlags, KeySpec, Keys};

/// Command flags, named as in Redis's `COMMAND INFO` replies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Flags(pub u32);

impl Flags {
    pub const NONE: Flags = Flags(0);
    pub const WRITE: Flags = Flags(1 << 0);
    pub const READONLY: Flags = Flags(1 << 1);
    pub const DENYOOM: Flags = Flags(1 << 2);
    pub const ADMIN: Flags = Flags(1 << 3);
    pub const PUBSUB: Flags = Flags(1 << 4);
    pub const NOSCRIPT: Flags = Flags(1 << 5);
    pub const BLOCKING: Flags = Flags(1 << 6);
    pub const LOADING: Flags = Flags(1 << 7);
    pub const STALE: Flags = Flags(1 << 8);
    pub const SKIP_MONITOR: Flags = Flags(1 << 9);
    pub const SKIP_SLOWLOG: Flags = Flags(1 << 10);
    pub const FAST: Flags = Flags(1 << 11);
    pub const NO_AUTH: Flags = Flags(1 << 12);
    pub const MAY_REPLICATE: Flags = Flags(1 << 13);
    pub const NO_MULTI: Flags = Flags(1 << 14);
    pub const ALLOW_BUSY: Flags = Flags(1 << 15);
    pub const SENTINEL: Flags = Flags(1 << 16);
    pub const NO_MANDATORY_KEYS: Flags = Flags(1 << 17);

    /// Flags as COMMAND shows them, in Redis's order; `may_replicate` and `sentinel` are internal
    /// and hidden, as in Redis.
    const SHOWN: [(Flags, &'static str); 16] = [
        (Flags::WRITE, "write"),
        (Flags::READONLY, "readonly"),
        (Flags::DENYOOM, "denyoom"),
        (Flags::ADMIN, "admin"),
        (Flags::PUBSUB, "pubsub"),
        (Flags::NOSCRIPT, "noscript"),
        (Flags::BLOCKING, "blocking"),
        (Flags::LOADING, "loading"),
        (Flags::STALE, "stale"),
        (Flags::SKIP_MONITOR, "skip_monitor"),
        (Flags::SKIP_SLOWLOG, "skip_slowlog"),
        (Flags::FAST, "fast"),
        (Flags::NO_AUTH, "no_auth"),
        (Flags::NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (Flags::NO_MULTI, "no_multi"),
        (Flags::ALLOW_BUSY, "allow_busy"),
    ];

    /// Union of two flag sets (usable in `const` table entries).
    pub const fn or(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }

    /// True if every flag of `other` is set.
    pub const fn has(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Flag names as COMMAND INFO shows them, in Redis's order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Self::SHOWN
            .into_iter()
            .filter(move |(f, _)| self.has(*f))
            .map(|(_, n)| n)
    }
}

/// One argument of a command as COMMAND DOCS describes it (Redis's `arguments` in
/// `src/commands/*.json`).
#[derive(Clone, Copy, Debug)]
pub struct Arg {
    pub name: &'static str,
    pub kind: ArgKind,
    /// The keyword that introduces the argument ("" = none).
    pub token: &'static str,
    /// The version that added the argument ("" = the command's own).
    pub since: &'static str,
    pub optional: bool,
    pub multiple: bool,
    /// The token repeats with each occurrence (SORT ... GET a GET b).
    pub multiple_token: bool,
}

/// An argument's type; `OneOf` and `Block` group other arguments.
#[derive(Clone, Copy, Debug)]
pub enum ArgKind {
    /// A key, described by the command's key spec of this index.
    Key(usize),
    /// A pattern naming keys, described by the command's key spec of this index (SORT's BY/GET).
    PatternKey(usize),
    String,
    Integer,
    Double,
    Pattern,
    UnixTime,
    PureToken,
    OneOf(&'static [Arg]),
    Block(&'static [Arg]),
}

impl ArgKind {
    /// The type name COMMAND DOCS shows.
    pub fn name(self) -> &'static str {
        match self {
            ArgKind::Key(_) => "key",
            ArgKind::PatternKey(_) => "pattern",
            ArgKind::String => "string",
            ArgKind::Integer => "integer",
            ArgKind::Double => "double",
            ArgKind::Pattern => "pattern",
            ArgKind::UnixTime => "unix-time",
            ArgKind::PureToken => "pure-token",
            ArgKind::OneOf(_) => "oneof",
            ArgKind::Block(_) => "block",
        }
    }
}

impl Arg {
    const fn of(name: &'static str, kind: ArgKind) -> Arg {
        Arg {
            name,
            kind,
            token: "",
            since: "",
            optional: false,
            multiple: false,
            multiple_token: false,
        }
    }
    /// A key described by key spec `spec`.
    pub const fn key(name: &'static str, spec: usize) -> Arg {
        Arg::of(name, ArgKind::Key(spec))
    }
    pub const fn string(name: &'static str) -> Arg {
        Arg::of(name, ArgKind::String)
    }
    pub const fn integer(name: &'static str) -> Arg {
        Arg::of(name, ArgKind::Integer)
    }
    pub const fn double(name: &'static str) -> Arg {
        Arg::of(name, ArgKind::Double)
    }
    pub const fn pattern(name: &'static str) -> Arg {
        Arg::of(name, ArgKind::Pattern)
    }
    pub const fn unix_time(name: &'static str) -> Arg {
        Arg::of(name, ArgKind::UnixTime)
    }
    /// A keyword standing alone (NX, GET, REPLACE).
    pub const fn pure_token(name: &'static str, token: &'static str) -> Arg {
        Arg::of(name, ArgKind::PureToken).with_token(token)
    }
    /// Exactly one of `args`.
    pub const fn oneof(name: &'static str, args: &'static [Arg]) -> Arg {
        Arg::of(name, ArgKind::OneOf(args))
    }
    /// `args` together, in order.
    pub const fn block(name: &'static str, args: &'static [Arg]) -> Arg {
        Arg::of(name, ArgKind::Block(args))
    }
    /// Introduced by `token` (EX seconds).
    pub const fn with_token(self, token: &'static str) -> Arg {
        Arg { token, ..self }
    }
    pub const fn since(self, since: &'static str) -> Arg {
        Arg { since, ..self }
    }
    pub const fn optional(self) -> Arg {
        Arg {
            optional: true,
            ..self
        }
    }
    pub const fn multiple(self) -> Arg {
        Arg {
            multiple: true,
            ..self
        }
    }
    /// Repeated with its token each time (`GET a GET b`).
    pub const fn multiple_token(self) -> Arg {
        Arg {
            multiple_token: true,
            ..self
        }
    }
    /// A pattern that names keys of key spec `spec` (SORT's BY and GET patterns).
    pub const fn pattern_key(name: &'static str, spec: usize) -> Arg {
        Arg::of(name, ArgKind::PatternKey(spec))
    }
}

/// COMMAND DOCS's description of a command beyond its summary: arguments, history, deprecation.
#[derive(Clone, Copy, Debug, Default)]
pub struct Docs {
    pub args: &'static [Arg],
    /// (version, change), oldest first.
    pub history: &'static [(&'static str, &'static str)],
    /// (deprecated since, replaced by) for deprecated commands.
    pub deprecated: Option<(&'static str, &'static str)>,
}

/// Which parts of its keys' values a command reads or writes. The SSD tier uses it to bring into
/// memory only what a command needs (one hash field, a list's head), as Redis-On-Rocks does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Parts {
    /// The whole value: strings, and commands that read or rewrite every element (HGETALL,
    /// SMEMBERS, SINTERSTORE, SORT).
    #[default]
    Whole,
    /// Only the key's metadata: type, element count, TTL (TYPE, HLEN, SCARD, ZCARD, LLEN, EXPIRE).
    Meta,
    /// The fields or members named by the arguments from index `first` on, every `step`-th
    /// (HGET key field: first 2, step 1; HSET key f v f v: first 2, step 2; ZSCORE, SISMEMBER).
    Members { first: usize, step: usize },
    /// An index range of a list or a rank, score or lex range of a sorted set (LRANGE, LINDEX,
    /// ZRANGE, ZCOUNT, ZRANGEBYSCORE).
    Range,
    /// The head or the tail of a list, or the lowest or highest members of a sorted set (LPUSH,
    /// RPOP, LMOVE, ZPOPMIN).
    Ends,
}

/// Where and how a command runs.
#[derive(Clone, Copy)]
pub enum Handler {
    /// Runs on the shard owning the command's keys (all keys must live on one shard; keyless
    /// commands run on the connection's own shard). Pipelined shard commands are batched per shard.
    Shard(fn(&mut ShardCtx<'_>) -> CmdResult),
    /// A keyed command written once for any placement of its keys (see [`crate::keyed`]): run in
    /// place on the owning shard when all its keys live on one shard, otherwise by the coordinator
    /// under intent locks. MGET, MSET, DEL, RENAME, COPY...
    Keys(KeysHandler),
    /// Runs synchronously on the connection's thread (connection state: SELECT, CLIENT SETNAME...).
    Conn(fn(&mut ConnCtx<'_>) -> CmdResult),
    /// Runs asynchronously on the connection's thread (server-wide work: DBSIZE, KEYS, INFO...).
    Async(AsyncHandler),
    /// A container whose subcommands carry the handlers (CLIENT, CONFIG, OBJECT...).
    Container,
    /// EXEC: runs the connection's queued transaction; the dispatcher implements it (see
    /// [`crate::services::multi`]).
    Exec,
}

/// An async handler: borrows the connection context for the duration of the command.
pub type AsyncHandler = for<'a, 'b> fn(&'a mut ConnCtx<'b>) -> LocalBoxFuture<'a, CmdResult>;

/// Redis's ACL categories in the order of its category table (acl.c), which is the order
/// COMMAND INFO lists them in.
pub const ACL_ORDER: &[&str] = &[
    "@keyspace",
    "@read",
    "@write",
    "@set",
    "@sortedset",
    "@list",
    "@hash",
    "@string",
    "@bitmap",
    "@hyperloglog",
    "@geo",
    "@stream",
    "@pubsub",
    "@admin",
    "@fast",
    "@slow",
    "@blocking",
    "@dangerous",
    "@connection",
    "@transaction",
    "@scripting",
];

/// One command (or subcommand).
pub struct CommandSpec {
    /// Lowercase name; subcommands use their own word (e.g. "getname"), the table prefixes the parent.
    pub name: &'static str,
    /// Redis arity: N = exactly N arguments (counting the name), -N = at least N.
    pub arity: i32,
    pub flags: Flags,
    /// Redis 7 key specs, in argument order (empty: the command takes no keys).
    pub keys: &'static [KeySpec],
    /// The command's own key finder, for specs positions cannot resolve (unknown, incomplete) or
    /// whose flags vary with the arguments (Redis's `getkeys_proc`).
    pub getkeys: Option<GetKeys>,
    /// `getkeys` exists only so that Strata can route a line Redis's key specs leave unresolved
    /// (Redis has no getkeys_proc for the command): COMMAND GETKEYS ignores it and fails as Redis
    /// does.
    pub getkeys_routing_only: bool,
    /// Documentation group: "string", "generic", "connection", "server".
    pub group: &'static str,
    pub summary: &'static str,
    pub since: &'static str,
    pub complexity: &'static str,
    /// ACL categories beyond those derived from flags and group (e.g. "@dangerous").
    pub acl: &'static [&'static str],
    /// Command tips for COMMAND INFO/DOCS (e.g. "request_policy:all_shards").
    pub tips: &'static [&'static str],
    /// Arguments, history and deprecation for COMMAND DOCS.
    pub docs: Docs,
    pub handler: Handler,
    pub subcommands: &'static [CommandSpec],
    /// For commands that also write a key in another database (MOVE, COPY ... DB): finds that
    /// database and the key's argument index, so the key is locked there too.
    pub other_db_key: Option<OtherDbKey>,
    /// Which parts of its keys' values the command touches (see [`Parts`]).
    pub parts: Parts,
    /// For commands that read keys they can only name while running (SORT's BY and GET patterns):
    /// says whether this command line does. If so, the command runs through the coordinator with
    /// its database locked shared on every shard, so whatever keys it reads, it reads atomically.
    pub reads_db: Option<ReadsDb>,
    /// For commands that may write a key their key specs do not name (GEORADIUS with STORE given
    /// twice: Redis's specs name the first, Redis writes the last): says whether this command line
    /// does. If so, the command runs through the coordinator with its database locked exclusive on
    /// every shard, so the write is atomic wherever that key lives.
    pub writes_db: Option<ReadsDb>,
    /// For a command that serves each of its keys on its own (the blocking pops: Redis serves a
    /// woken BLPOP from the key that became ready, whatever keys come before it): the same command
    /// line over only the keys `keep` accepts (it gets each key's argument index). A parked command whose keys span shards is then
    /// served by the shard whose key became ready, in that shard's turn (see `strata_shard::park`).
    pub per_key: Option<PerKey>,
    /// For a blocking move (BLMOVE, BRPOPLPUSH: source is the first key, destination the second):
    /// the ends it pops from and pushes to. When its source and destination live on different
    /// shards, a parked one is served by messages between the two at the write that made its
    /// source ready (see `strata_shard::park`).
    pub moves: Option<Moves>,
}

/// See [`CommandSpec::moves`]: `(wherefrom, whereto)`, None when the line names no valid ends (the
/// command then fails before it ever parks).
pub type Moves = fn(&[bytes::Bytes]) -> Option<(strata_core::list::End, strata_core::list::End)>;

/// See [`CommandSpec::per_key`].
pub type PerKey = fn(&[bytes::Bytes], &mut dyn FnMut(usize) -> bool) -> Vec<bytes::Bytes>;

/// See [`CommandSpec::reads_db`].
pub type ReadsDb = fn(&[bytes::Bytes]) -> bool;

/// See [`CommandSpec::other_db_key`]: `(database, argument index)` from the command line, or None
/// when the command names no other database (or names it badly: the handler then reports it).
pub type OtherDbKey = fn(&[bytes::Bytes]) -> Option<(usize, usize)>;

impl CommandSpec {
    /// A command (or subcommand) of a documentation `group`, with no extra ACL categories, tips or
    /// subcommands; add those with the `with_*` builders. Families wrap this in a short `cmd`.
    #[allow(clippy::too_many_arguments)]
    pub const fn new(
        group: &'static str,
        name: &'static str,
        arity: i32,
        flags: Flags,
        keys: &'static [KeySpec],
        summary: &'static str,
        since: &'static str,
        complexity: &'static str,
        handler: Handler,
    ) -> CommandSpec {
        CommandSpec {
            name,
            arity,
            flags,
            keys,
            getkeys: None,
            getkeys_routing_only: false,
            group,
            summary,
            since,
            complexity,
            acl: &[],
            tips: &[],
            docs: Docs {
                args: &[],
                history: &[],
                deprecated: None,
            },
            handler,
            subcommands: &[],
            other_db_key: None,
            parts: Parts::Whole,
            reads_db: None,
            writes_db: None,
            per_key: None,
            moves: None,
        }
    }

    /// The same spec, a blocking move with the ends `f` finds (see [`CommandSpec::moves`]).
    pub const fn with_moves(self, f: Moves) -> CommandSpec {
        CommandSpec {
            moves: Some(f),
            ..self
        }
    }

    /// The same spec, served key by key when it parks on keys of several shards (see
    /// [`CommandSpec::per_key`]).
    pub const fn with_per_key(self, f: PerKey) -> CommandSpec {
        CommandSpec {
            per_key: Some(f),
            ..self
        }
    }

    /// The same spec, reading keys named only at run time when `f` says so (see
    /// [`CommandSpec::reads_db`]).
    pub const fn with_reads_db(self, f: ReadsDb) -> CommandSpec {
        CommandSpec {
            reads_db: Some(f),
            ..self
        }
    }

    /// The same spec, writing keys named only at run time when `f` says so (see
    /// [`CommandSpec::writes_db`]).
    pub const fn with_writes_db(self, f: ReadsDb) -> CommandSpec {
        CommandSpec {
            writes_db: Some(f),
            ..self
        }
    }

    /// The same spec, touching only `parts` of its keys' values.
    pub const fn with_parts(self, parts: Parts) -> CommandSpec {
        CommandSpec { parts, ..self }
    }

    /// The same spec, declaring a key it writes in another database.
    pub const fn with_other_db_key(self, f: OtherDbKey) -> CommandSpec {
        CommandSpec {
            other_db_key: Some(f),
            ..self
        }
    }

    /// The same spec with a key finder for what its key specs cannot tell (see [`GetKeys`]).
    pub const fn with_getkeys(self, getkeys: GetKeys) -> CommandSpec {
        CommandSpec {
            getkeys: Some(getkeys),
            ..self
        }
    }

    /// The same spec with a key finder used for routing only (see
    /// [`CommandSpec::getkeys_routing_only`]).
    pub const fn with_routing_keys(self, getkeys: GetKeys) -> CommandSpec {
        CommandSpec {
            getkeys: Some(getkeys),
            getkeys_routing_only: true,
            ..self
        }
    }

    /// The same spec with its arguments documented (COMMAND DOCS).
    pub const fn with_args(self, args: &'static [Arg]) -> CommandSpec {
        CommandSpec {
            docs: Docs { args, ..self.docs },
            ..self
        }
    }

    /// The same spec with its history of changes (COMMAND DOCS).
    pub const fn with_history(
        self,
        history: &'static [(&'static str, &'static str)],
    ) -> CommandSpec {
        CommandSpec {
            docs: Docs {
                history,
                ..self.docs
            },
            ..self
        }
    }

    /// The same spec, documented as deprecated since `since` in favour of `replaced_by`.
    pub const fn deprecated(self, since: &'static str, replaced_by: &'static str) -> CommandSpec {
        CommandSpec {
            docs: Docs {
                deprecated: Some((since, replaced_by)),
                ..self.docs
            },
            ..self
        }
    }

    /// The same spec with command tips (COMMAND INFO's request/response policies).
    pub const fn with_tips(self, tips: &'static [&'static str]) -> CommandSpec {
        CommandSpec { tips, ..self }
    }

    /// The same spec with ACL categories beyond the derived ones.
    pub const fn with_acl(self, acl: &'static [&'static str]) -> CommandSpec {
        CommandSpec { acl, ..self }
    }

    /// The same spec with subcommands.
    pub const fn with_subcommands(self, subcommands: &'static [CommandSpec]) -> CommandSpec {
        CommandSpec {
            subcommands,
            ..self
        }
    }

    /// ACL categories: derived from flags (`write` → @write, no `fast` → @slow, `admin` →
    /// @admin @dangerous, ...) and group, plus the explicit extras.
    pub fn acl_categories(&self) -> Vec<&'static str> {
        let f = self.flags;
        let mut cats: Vec<&'static str> = Vec::new();
        let mut add = |c: &'static str| {
            if !cats.contains(&c) {
                cats.push(c)
            }
        };
        if f.has(Flags::WRITE) {
            add("@write");
        }
        if f.has(Flags::READONLY) {
            add("@read");
        }
        // A container's category is its subcommands' business; Redis lists only @slow for it.
        if !matches!(self.handler, Handler::Container) {
            match self.group {
                "string" => add("@string"),
                "hash" => add("@hash"),
                "list" => add("@list"),
                "set" => add("@set"),
                "sorted-set" => add("@sortedset"),
                "bitmap" => add("@bitmap"),
                "hyperloglog" => add("@hyperloglog"),
                "geo" => add("@geo"),
                // SORT is "generic" but lists the types it reads instead of @keyspace.
                "generic" if !self.acl.contains(&"@list") => add("@keyspace"),
                "connection" => add("@connection"),
                _ => {}
            }
        }
        if f.has(Flags::ADMIN) {
            add("@admin");
            add("@dangerous");
        }
        if f.has(Flags::PUBSUB) {
            add("@pubsub");
        }
        if f.has(Flags::BLOCKING) {
            add("@blocking");
        }
        add(if f.has(Flags::FAST) { "@fast" } else { "@slow" });
        for c in self.acl {
            add(c);
        }
        // Redis lists categories in the order of its category table.
        cats.sort_by_key(|c| ACL_ORDER.iter().position(|o| o == c).unwrap_or(usize::MAX));
        cats
    }

    /// The key specs with the command's key finder.
    pub fn key_specs(&self) -> Keys<'static> {
        Keys {
            specs: self.keys,
            getkeys: self.getkeys,
        }
    }

    /// Calls `f(arg_index, access)` for every key argument of `args` (args[0] is the command name),
    /// in argument order; `access` says whether the key is only read (RO) or written (RW/OW/RM).
    /// Allocates nothing.
    #[inline]
    pub fn for_each_key(&self, args: &[Bytes], mut f: impl FnMut(usize, KeyAccess)) {
        self.key_specs()
            .each(args, false, |i, flags| f(i, flags.access()));
    }

    /// The index of the first key argument of `args`, if any.
    pub fn first_key(&self, args: &[Bytes]) -> Option<usize> {
        self.key_specs().first(args)
    }

    /// True if the command can take keys.
    pub fn has_keys(&self) -> bool {
        self.key_specs().any()
    }

    /// Flag names as COMMAND INFO shows them, with `movablekeys` derived from the key specs as
    /// Redis derives it (keys that the legacy first/last/step triple cannot describe).
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = self.flags.names().collect();
        if self.has_keys() && self.key_specs().legacy_range().1 {
            // Redis lists it after no_multi and before allow_busy.
            let at = names
                .iter()
                .position(|n| *n == "allow_busy")
                .unwrap_or(names.len());
            names.insert(at, "movablekeys");
        }
        names
    }

    /// True if `argc` arguments satisfy the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        if self.arity >= 0 {
            argc == self.arity as usize
        } else {
            argc >= (-self.arity) as usize
        }
    }
}

/// A command resolved from the table: the spec that runs, its full name and its stats id.
#[derive(Clone, Copy)]
pub struct Resolved {
    pub spec: &'static CommandSpec,
    /// Full name, e.g. "get" or "client|list".
    pub name: &'static str,
    pub id: usize,
}

/// The command table.
pub struct Table {
    by_name: HashMap<&'static str, usize, foldhash::fast::RandomState>,
    entries: Vec<Resolved>,
    top: Vec<&'static CommandSpec>,
    /// The config file's `rename-command` lines, applied once at start-up before serving.
    renamed: std::sync::OnceLock<Renamed>,
}

/// The top-level names clients may call after `rename-command`, as Redis's `server.commands`
/// after it: a renamed command answers only to its new name, a removed one to none, yet keeps
/// its own name everywhere the server names it (COMMAND, errors, CLIENT LIST, INFO), and
/// internal lookups by full name ([`Table::get`], Redis's `orig_commands`) still find it.
struct Renamed {
    callable: HashMap<String, usize, foldhash::fast::RandomState>,
    /// The top-level commands still callable, in table order (COMMAND, COMMAND COUNT).
    top: Vec<&'static CommandSpec>,
}

/// A command of the server group (also SLOWLOG's and LATENCY's subcommands).
#[allow(clippy::too_many_arguments)]
pub(crate) const fn server_command(
    name: &'static str,
    arity: i32,
    flags: Flags,
    summary: &'static str,
    since: &'static str,
    complexity: &'static str,
    acl: &'static [&'static str],
    tips: &'static [&'static str],
    handler: Handler,
) -> CommandSpec {
    CommandSpec::new(
        "server",
        name,
        arity,
        flags,
        &[],
        summary,
        since,
        complexity,
        handler,
    )
    .with_acl(acl)
    .with_tips(tips)
}

/// The process's command table: every family's commands, installed once by whoever assembles them
/// (`strata_commands::table`). The server-wide services name commands by it where no context is at
/// hand (a client closed for its output limits is logged with its last command).
static PROCESS: std::sync::OnceLock<&'static Table> = std::sync::OnceLock::new();

/// Installs `table` as the process's command table; the first installed stays.
pub fn set_process(table: &'static Table) {
    if PROCESS.set(table).is_ok() {
        crate::names::install(table.entries().iter().map(|e| e.name).collect());
    }
}

/// The process's command table (see [`set_process`]); before one is installed (this crate's own
/// unit tests) an empty table, which names no command.
pub fn process() -> &'static Table {
    static EMPTY: std::sync::OnceLock<Table> = std::sync::OnceLock::new();
    PROCESS
        .get()
        .copied()
        .unwrap_or_else(|| EMPTY.get_or_init(|| Table::new(&[])))
}

/// Why a command line could not be resolved, carrying Redis's exact error text.
pub enum Lookup {
    Found(Resolved),
    /// No such command or subcommand.
    Unknown(String),
    /// A known command with the wrong number of arguments (counted as a rejected call).
    BadArity(Resolved, String),
}

impl Table {
    /// Builds the table from every family's command list and validates it (panicking on a broken
    /// entry: the table is static, so this fails at start-up and in unit tests, never later).
    pub fn new(families: &[&'static [CommandSpec]]) -> Table {
        let mut t = Table {
            by_name: HashMap::default(),
            entries: Vec::new(),
            top: Vec::new(),
            renamed: std::sync::OnceLock::new(),
        };
        for fam in families {
            for spec in fam.iter() {
                t.add(spec, None);
            }
        }
        t
    }

    fn add(&mut self, spec: &'static CommandSpec, parent: Option<&'static CommandSpec>) {
        validate(spec, parent);
        let name: &'static str = match parent {
            None => spec.name,
            Some(p) => Box::leak(format!("{}|{}", p.name, spec.name).into_boxed_str()),
        };
        assert!(
            self.by_name.insert(name, self.entries.len()).is_none(),
            "duplicate command {name}"
        );
        self.entries.push(Resolved {
            spec,
            name,
            id: self.entries.len(),
        });
        if parent.is_none() {
            self.top.push(spec);
        }
        for sub in spec.subcommands {
            self.add(sub, Some(spec));
        }
    }

    /// Top-level commands clients may call (all of them unless `rename-command` removed some).
    pub fn commands(&self) -> &[&'static CommandSpec] {
        match self.renamed.get() {
            Some(r) => &r.top,
            None => &self.top,
        }
    }

    /// Applies `rename-command` lines in order (lower-cased names; an empty new name removes the
    /// command), as Redis does while reading its config file. Call once, before serving: the
    /// names cached by [`Table::resolve`] are not revisited.
    pub fn rename_commands(&self, renames: &[(String, String)]) -> Result<(), String> {
        if renames.is_empty() {
            return Ok(());
        }
        let mut callable: HashMap<String, usize, foldhash::fast::RandomState> = self
            .entries
            .iter()
            .filter(|e| !e.name.contains('|'))
            .map(|e| (e.name.to_string(), e.id))
            .collect();
        for (from, to) in renames {
            let Some(id) = callable.remove(&from.to_ascii_lowercase()) else {
                return Err("No such command in rename-command".into());
            };
            if !to.is_empty() && callable.insert(to.to_ascii_lowercase(), id).is_some() {
                return Err("Target command name already exists".into());
            }
        }
        let ids: std::collections::HashSet<usize> = callable.values().copied().collect();
        let top = self
            .entries
            .iter()
            .filter(|e| ids.contains(&e.id))
            .map(|e| e.spec)
            .collect();
        self.renamed
            .set(Renamed { callable, top })
            .map_err(|_| "commands were already renamed".to_string())
    }

    /// The top-level command a client's (lower-case) name calls, after `rename-command`.
    fn callable(&self, lower: &str) -> Option<Resolved> {
        match self.renamed.get() {
            Some(r) => r.callable.get(lower).map(|&i| self.entries[i]),
            None => self.get(lower).filter(|_| !lower.contains('|')),
        }
    }

    /// Whether `entry` (or, for a subcommand, its container) can still be called: `rename-command
    /// X ""` hides X and its subcommands from COMMAND LIST as Redis does.
    pub fn is_callable(&self, entry: &Resolved) -> bool {
        let Some(r) = self.renamed.get() else {
            return true;
        };
        let top = entry.name.split('|').next().unwrap_or(entry.name);
        self.get(top)
            .is_some_and(|t| r.callable.values().any(|&i| i == t.id))
    }

    /// The entry a client's name designates in COMMAND INFO/DOCS/GETKEYS ("get",
    /// "client|list"): the container by the name clients call it, then its subcommand.
    pub fn lookup_client_name(&self, name: &str) -> Option<Resolved> {
        let lower = name.to_ascii_lowercase();
        match lower.split_once('|') {
            None => self.callable(&lower),
            Some((top, sub)) => {
                let top = self.callable(top)?;
                self.get(&format!("{}|{sub}", top.name))
            }
        }
    }

    /// Every entry including subcommands, indexed by id.
    pub fn entries(&self) -> &[Resolved] {
        &self.entries
    }

    /// Looks up a full name ("get", "client|list").
    pub fn get(&self, name: &str) -> Option<Resolved> {
        self.by_name.get(name).map(|&i| self.entries[i])
    }

    /// Resolves a command line: name (case-insensitive), container subcommand, arity. The errors are
    /// Redis's: unknown command, unknown subcommand, wrong number of arguments.
    pub fn resolve(&self, args: &[bytes::Bytes]) -> Lookup {
        let Some(first) = args.first() else {
            return Lookup::Unknown("ERR empty command".into());
        };
        // A workload uses a handful of commands: a name this thread resolved recently, spelled
        // the same way, skips the case folding and the hash lookup.
        let key = RecentName::of(first);
        let process_table = PROCESS.get().is_some_and(|p| std::ptr::eq(self, *p));
        if let (Some(key), true) = (key, process_table) {
            if let Some(cmd) = RecentName::find(key).map(|id| self.entries[id]) {
                if cmd.spec.arity_ok(args.len()) {
                    return Lookup::Found(cmd);
                }
            }
        }
        let mut lower = [0u8; 32];
        // A subcommand's full name ("config|get") is not a command a client may send (Redis
        // #10070): only top-level names are looked up. A name renamed by the config file may be
        // longer than the table's, so it is looked up whole.
        let found = if first.len() <= lower.len() {
            lower[..first.len()].copy_from_slice(first);
            lower[..first.len()].make_ascii_lowercase();
            std::str::from_utf8(&lower[..first.len()])
                .ok()
                .and_then(|n| self.callable(n))
        } else if self.renamed.get().is_some() {
            std::str::from_utf8(first)
                .ok()
                .and_then(|n| self.callable(&n.to_ascii_lowercase()))
        } else {
            None
        };
        let Some(cmd) = found else {
            return Lookup::Unknown(unknown_command_text(args));
        };
        if !cmd.spec.arity_ok(args.len()) {
            let msg = format!("ERR wrong number of arguments for '{}' command", cmd.name);
            return Lookup::BadArity(cmd, msg);
        }
        if let (Some(key), true, true) = (key, process_table, cmd.spec.subcommands.is_empty()) {
            RecentName::remember(key, cmd.id);
        }
        // A container always names a subcommand (its arity is -2); a command with a bare form
        // and subcommands (COMMAND) runs its own handler when called alone.
        if !cmd.spec.subcommands.is_empty() && args.len() > 1 {
            let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
            let Some(sub) = self.get(&format!("{}|{}", cmd.name, sub)) else {
                return Lookup::Unknown(format!(
                    "ERR unknown subcommand '{}'. Try {} HELP.",
                    truncate_arg(&args[1]),
                    // The name as the client called it (renamed or not), as Redis does.
                    String::from_utf8_lossy(first).to_ascii_uppercase()
                ));
            };
            if !sub.spec.arity_ok(args.len()) {
                let msg = format!("ERR wrong number of arguments for '{}' command", sub.name);
                return Lookup::BadArity(sub, msg);
            }
            return Lookup::Found(sub);
        }
        Lookup::Found(cmd)
    }
}

/// A command name as a client spelled it (at most 16 bytes, zero-padded) with its length: the key
/// of the per-thread cache of recently resolved commands without subcommands. Only the process's
/// table is cached (tests build others), so an entry's id always indexes that table.
#[derive(Clone, Copy, PartialEq)]
struct RecentName {
    name: u128,
    len: u8,
}

/// Entries kept: enough for the commands one thread's clients interleave (SET and GET, LPUSH and
/// BLPOP, MULTI … EXEC), few enough that a miss costs four comparisons.
const RECENT: usize = 4;

thread_local! {
    static RECENT_NAMES: [std::cell::Cell<Option<(RecentName, u16)>>; RECENT] =
        const { [const { std::cell::Cell::new(None) }; RECENT] };
}

impl RecentName {
    #[inline]
    fn of(raw: &[u8]) -> Option<RecentName> {
        let mut name = [0u8; 16];
        name.get_mut(..raw.len())?.copy_from_slice(raw);
        Some(RecentName {
            name: u128::from_ne_bytes(name),
            len: raw.len() as u8,
        })
    }

    #[inline]
    fn find(key: RecentName) -> Option<usize> {
        RECENT_NAMES.with(|slots| {
            slots.iter().find_map(|s| {
                s.get()
                    .filter(|(k, _)| *k == key)
                    .map(|(_, id)| id as usize)
            })
        })
    }

    /// Puts `key` first, the others moving down one place (the last one drops out).
    fn remember(key: RecentName, id: usize) {
        let Ok(id) = u16::try_from(id) else { return };
        RECENT_NAMES.with(|slots| {
            let mut carry = Some((key, id));
            for slot in slots {
                carry = slot.replace(carry);
                if carry.is_none_or(|(k, _)| k == key) {
                    break;
                }
            }
        });
    }
}

fn truncate_arg(a: &[u8]) -> String {
    // Redis shows at most 128 bytes of each argument in these messages.
    crate::error::echo_128(a).replace(['\r', '\n'], " ")
}

/// `ERR unknown command '<name>', with args beginning with: '<a1>' '<a2>' ` exactly as Redis.
pub fn unknown_command_text(args: &[bytes::Bytes]) -> String {
    let mut list = String::new();
    for a in &args[1..] {
        if list.len() >= 128 {
            break;
        }
        let room = 128 - list.len();
        list.push_str(&format!("'{}' ", truncate_arg(&a[..a.len().min(room)])));
    }
    format!(
        "ERR unknown command '{}', with args beginning with: {list}",
        truncate_arg(&args[0])
    )
}

fn validate(spec: &CommandSpec, parent: Option<&CommandSpec>) {
    let name = spec.name;
    assert!(
        !name.is_empty() && name.len() <= 32,
        "{name}: bad name length"
    );
    assert!(
        name.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_'),
        "{name}: name must be lowercase"
    );
    assert!(spec.arity != 0, "{name}: arity 0 is impossible");
    if parent.is_some() {
        assert!(spec.arity.abs() >= 2, "{name}: a subcommand has arity >= 2");
    }
    for (i, k) in spec.keys.iter().enumerate() {
        if let Err(why) = k.validate() {
            panic!("{name}: key spec {i}: {why}");
        }
        // Like Redis, a fixed arity must leave room for every fixed key position.
        if let (BeginSearch::Index(pos), FindKeys::Range { lastkey, .. }) =
            (k.begin_search, k.find_keys)
        {
            let last = pos as i64 + lastkey.max(0) as i64;
            assert!(
                spec.arity < 0 || last < spec.arity as i64,
                "{name}: key spec {i} lies beyond the arity"
            );
        }
        let positional = !k.flags.has(KeyFlags::INCOMPLETE)
            && !k.flags.has(KeyFlags::VARIABLE_FLAGS)
            && k.begin_search != BeginSearch::Unknown
            && k.find_keys != FindKeys::Unknown;
        assert!(
            positional || spec.getkeys.is_some(),
            "{name}: key spec {i} needs the command's key finder (getkeys)"
        );
    }
    validate_args(name, spec.docs.args, spec.keys.len());
    if !spec.docs.args.is_empty() {
        // NOT_KEY specs (shard channels) are documented as plain strings, as Redis does.
        for i in (0..spec.keys.len()).filter(|&i| !spec.keys[i].flags.has(KeyFlags::NOT_KEY)) {
            assert!(
                refers_to_key_spec(spec.docs.args, i),
                "{name}: no argument documents key spec {i}"
            );
        }
    }
    assert!(
        !(spec.flags.has(Flags::WRITE) && spec.flags.has(Flags::READONLY)),
        "{name}: write and readonly are exclusive"
    );
    match spec.handler {
        Handler::Container => {
            assert!(
                !spec.subcommands.is_empty(),
                "{name}: container without subcommands"
            );
            assert!(spec.arity == -2, "{name}: containers have arity -2");
        }
        Handler::Shard(_) | Handler::Keys(_) | Handler::Exec => {
            assert!(
                spec.subcommands.is_empty(),
                "{name}: only containers have subcommands"
            )
        }
        Handler::Conn(_) | Handler::Async(_) => {
            // Like Redis's COMMAND: the handler serves the bare form, subcommands the rest.
            assert!(
                spec.subcommands.is_empty() || (spec.arity == -1 && parent.is_none()),
                "{name}: a command with subcommands and a bare form has arity -1"
            );
        }
    }
    if let Handler::Keys(_) = spec.handler {
        assert!(spec.has_keys(), "{name}: multi-key commands need key specs");
    }
}

fn validate_args(name: &str, args: &[Arg], specs: usize) {
    for a in args {
        assert!(!a.name.is_empty(), "{name}: an argument without a name");
        match a.kind {
            ArgKind::Key(i) | ArgKind::PatternKey(i) => {
                assert!(i < specs, "{name}: argument {} names key spec {i}", a.name)
            }
            ArgKind::PureToken => assert!(!a.token.is_empty(), "{name}: {} has no token", a.name),
            ArgKind::OneOf(sub) | ArgKind::Block(sub) => {
                assert!(!sub.is_empty(), "{name}: {} groups nothing", a.name);
                validate_args(name, sub, specs);
            }
            _ => {}
        }
    }
}

fn refers_to_key_spec(args: &[Arg], spec: usize) -> bool {
    args.iter().any(|a| match a.kind {
        ArgKind::Key(i) | ArgKind::PatternKey(i) => i == spec,
        ArgKind::OneOf(sub) | ArgKind::Block(sub) => refers_to_key_spec(sub, spec),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_command_text_matches_redis() {
        let a: Vec<bytes::Bytes> = ["foo", "a", "b"]
            .iter()
            .map(|s| bytes::Bytes::from(*s))
            .collect();
        assert_eq!(
            unknown_command_text(&a),
            "ERR unknown command 'foo', with args beginning with: 'a' 'b' "
        );
    }
}
