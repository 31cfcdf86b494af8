//! Wire-protocol behaviour, compared reply-for-reply with redis-server: command errors, inline commands,
//! malformed RESP (including whether the connection is closed afterwards), pipelining, RESP3 via HELLO, and
//! what a client announcing huge lengths may cost the server.
//!
//! Every case here was checked against redis-server 7.0 by hand first; a case whose reply depends on how
//! Redis happens to split its reads is left out.

use crate::harness::{encode_command, Conn, Diff, Pair, Reply, Server};

/// Sends `input` on a fresh pair of connections (a protocol error closes the connection, so cases do not
/// share one) and compares replies and close-vs-open.
fn raw_case(diff: &Diff, input: &[u8]) {
    let mut pair = diff.new_conns();
    pair.run_raw(input);
}

fn ping_frame() -> Vec<u8> {
    encode_command(&["PING"])
}

// --- command-level errors ----------------------------------------------------------------------------------

#[test]
fn unknown_command_error_quotes_name_and_first_arguments() {
    let mut d = Diff::new();
    d.run(&["foo", "a", "b"]);
    d.run(&["foo"]);
    d.run(&["FoO", "bar"]);
    d.run(&[
        "foo", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p",
    ]);
    // The argument list is cut at 128 bytes; a long name is cut at 128 bytes too.
    let long_y = "y".repeat(200);
    let long_z = "z".repeat(200);
    d.run(&["foo", long_y.as_str(), long_z.as_str()]);
    let long_name = "f".repeat(200);
    d.run(&[long_name.as_str(), "a"]);
    // Newlines in arguments are shown as spaces.
    d.run(&["foo", "c\nd", "e\r\nf"]);
    // An empty command name.
    d.run(&[""]);
    d.run(&["", "x"]);
    // A subcommand's full name is not a command (Redis #10070).
    d.run(&["GET|"]);
    d.run(&["GET|SET", "k"]);
    d.run(&["CONFIG|GET", "GET_XX"]);
    d.run(&["client|id"]);
    d.run(&["CONFIG", "GET_XX"]);
}

#[test]
fn errors_echo_an_argument_only_up_to_its_first_nul_byte() {
    // Redis formats echoed arguments with `%s`, which stops at a NUL byte.
    let mut d = Diff::new();
    d.run(&["SET", "k", "v"]);
    let args: [&[u8]; 8] = [
        b"EXPIRE\0x",
        b"\0",
        b"ab\0cd",
        b"CLIENT",
        b"TRACKING",
        b"PFDEBUG",
        b"he\0llo",
        b"DEBUG",
    ];
    let [name, nul, mid, client, tracking, pfdebug, hello_opt, debug] = args;
    d.run(&[name, b"k".as_slice(), b"100"]);
    d.run(&[b"EXPIRE".as_slice(), b"k", b"100", nul]);
    d.run(&[b"EXPIRE".as_slice(), b"k", b"100", mid]);
    d.run(&[b"foo".as_slice(), mid, nul, b"x"]);
    d.run(&[b"CONFIG".as_slice(), mid]);
    d.run(&[pfdebug, mid, b"k"]);
    d.run(&[b"HELLO".as_slice(), b"3", hello_opt]);
    d.run(&[client, b"LIST", b"TYPE", mid]);
    d.run(&[
        client, tracking, b"on", b"BCAST", b"PREFIX", b"a\0b", b"PREFIX", b"a",
    ]);
    d.run(&[debug, mid]);
}

#[test]
fn wrong_arity_error_names_the_command_in_lower_case() {
    let mut d = Diff::new();
    d.run(&["GET"]);
    d.run(&["get", "a", "b"]);
    d.run(&["GeT"]);
    d.run(&["SET", "a"]);
    d.run(&["ECHO"]);
    d.run(&["PING", "a", "b"]);
}

#[test]
fn commands_are_case_insensitive() {
    let mut d = Diff::new();
    d.run_all(&[
        &["PiNg"],
        &["ping", "hello"],
        &["sEt", "k", "v"],
        &["GET", "k"],
    ]);
}

// --- inline commands ---------------------------------------------------------------------------------------

#[test]
fn inline_commands_are_executed() {
    let mut d = Diff::new();
    d.run_raw(b"PING\r\n");
    d.run_raw(b"set a b\r\nget a\r\n");
    d.run_raw(b"PING hello\r\n");
    // A bare \n ends an inline command too.
    d.run_raw(b"PING\nPING x\n");
    // Runs of spaces and tabs separate arguments.
    d.run_raw(b"  ECHO   \t spaced  \r\n");
}

#[test]
fn inline_quoted_arguments_are_unescaped() {
    let mut d = Diff::new();
    d.run_raw(b"set \"a b\" \"c\\x41d\"\r\nget \"a b\"\r\n");
    d.run_raw(b"set 'sq key' c\r\nget 'sq key'\r\n");
    d.run_raw(b"ECHO \"\\r\\n\\t\\b\\a\\\"\\\\\"\r\n");
    d.run_raw(b"ECHO \"\"\r\n");
    d.run_raw(b"ECHO ''\r\n");
    d.run_raw(b"foo \"x y\" 'z'\r\n");
}

#[test]
fn inline_unbalanced_quotes_close_the_connection() {
    let d = Diff::new();
    raw_case(&d, b"set \"a b\r\n");
    raw_case(&d, b"set 'a b\r\n");
    // A closing quote must be followed by a space or the end of the line.
    raw_case(&d, b"set 'a'b c\r\n");
    raw_case(&d, b"ECHO \"a\"b\r\n");
    // Replies to the commands before the bad line are still sent.
    raw_case(&d, b"PING\r\nECHO \"x\r\nPING\r\n");
}

#[test]
fn empty_lines_and_empty_multibulks_are_skipped() {
    let mut d = Diff::new();
    d.run_raw(b"\r\n\r\nPING\r\n");
    d.run_raw(b"\nPING\n");
    d.run_raw(b"   \r\nPING\r\n");
    d.run_raw(b"PING\r\n\r\n");
    d.run_raw(b"*0\r\nPING\r\n");
    d.run_raw(b"*-1\r\nPING\r\n");
    d.run_raw(b"*-5\r\nPING\r\n");
    // An empty bulk argument is an argument.
    d.run_raw(b"*2\r\n$4\r\nECHO\r\n$0\r\n\r\n");
    d.run_raw(b"*1\r\n$0\r\n\r\n");
}

// --- malformed RESP ----------------------------------------------------------------------------------------

#[test]
fn invalid_multibulk_count_closes_the_connection() {
    let d = Diff::new();
    raw_case(&d, b"*abc\r\n");
    raw_case(&d, b"*1x\r\n");
    raw_case(&d, b"*\r\n");
    raw_case(&d, b"*+1\r\n$4\r\nPING\r\n");
    raw_case(&d, b"*01\r\n$4\r\nPING\r\n");
    // Earlier pipelined commands are answered before the error.
    let mut input = ping_frame().repeat(3);
    input.extend_from_slice(b"*abc\r\nPING\r\n");
    raw_case(&d, &input);
}

#[test]
fn multibulk_element_must_be_a_bulk_string() {
    let d = Diff::new();
    raw_case(&d, b"*3\r\n$3\r\nSET\r\n:1\r\n");
    raw_case(&d, b"*1\r\n+PING\r\n");
    raw_case(&d, b"*2\r\n$4\r\nECHO\r\n*1\r\n");
}

#[test]
fn invalid_bulk_length_closes_the_connection() {
    let d = Diff::new();
    raw_case(&d, b"*1\r\n$-5\r\n");
    raw_case(&d, b"*1\r\n$-1\r\n");
    raw_case(&d, b"*2\r\n$3\r\nget\r\n$-1\r\n");
    raw_case(&d, b"*1\r\n$\r\n");
    raw_case(&d, b"*1\r\n$4x\r\nPING\r\n");
    raw_case(&d, b"*1\r\n$+4\r\nPING\r\n");
}

#[test]
fn dollar_line_outside_a_multibulk_is_an_inline_command() {
    let mut d = Diff::new();
    d.run_raw(b"$-5\r\n");
    d.run_raw(b"$3\r\n");
}

#[test]
fn bulk_length_above_512mb_is_rejected() {
    let d = Diff::new();
    raw_case(&d, b"*1\r\n$536870913\r\n");
    raw_case(&d, b"*1\r\n$2147483648\r\n");
    raw_case(&d, b"*1\r\n$99999999999999999999\r\n");
    // Exactly 512 MB is allowed: the server waits for the data.
    raw_case(&d, b"*1\r\n$536870912\r\n");
}

#[test]
fn multibulk_count_above_i32_max_is_rejected() {
    let d = Diff::new();
    raw_case(&d, b"*2147483648\r\n");
    raw_case(&d, b"*99999999999999999999\r\n");
    // i32::MAX itself is allowed: the server waits for the elements.
    raw_case(&d, b"*2147483647\r\n");
    raw_case(&d, b"*1048577\r\n");
}

#[test]
fn inline_request_over_64k_without_newline_is_rejected() {
    let d = Diff::new();
    raw_case(&d, &b"a".repeat(70_000));
    raw_case(&d, &b"a".repeat(65_537));
    // Exactly 64 KiB without a newline is still waited on. (Whether 64 KiB followed by a newline is accepted
    // depends on where Redis's reads split the input, so that case is not compared.)
    raw_case(&d, &b"a".repeat(65_536));
}

#[test]
fn count_line_over_64k_is_rejected() {
    let d = Diff::new();
    let mut multibulk = b"*".to_vec();
    multibulk.extend(b"1".repeat(70_000));
    raw_case(&d, &multibulk);
    let mut bulk = b"*1\r\n$".to_vec();
    bulk.extend(b"1".repeat(70_000));
    raw_case(&d, &bulk);
    let mut after_ping = ping_frame();
    after_ping.extend_from_slice(&multibulk);
    raw_case(&d, &after_ping);
}

#[test]
fn quit_replies_ok_then_closes() {
    let d = Diff::new();
    raw_case(&d, b"QUIT\r\n");
    raw_case(&d, b"PING\r\nQUIT\r\nPING\r\n");
    let mut multibulk = ping_frame();
    multibulk.extend(encode_command(&["QUIT"]));
    multibulk.extend(ping_frame());
    raw_case(&d, &multibulk);
}

// --- pipelining --------------------------------------------------------------------------------------------

/// A mixed pipeline: multibulk and inline commands, values of several sizes, errors in the middle.
fn mixed_pipeline() -> Vec<u8> {
    let big = "v".repeat(700);
    let mut input = Vec::new();
    input.extend(encode_command(&["SET", "k1", "hello"]));
    input.extend(encode_command(&["GET", "k1"]));
    input.extend_from_slice(b"set k2 \"two words\"\r\n");
    input.extend(encode_command(&["GET", "k2"]));
    input.extend(encode_command(&["SET", "big", big.as_str()]));
    input.extend(encode_command(&["GET", "big"]));
    input.extend(encode_command(&["nosuchcommand", "x"]));
    input.extend(encode_command(&["GET"]));
    input.extend_from_slice(b"PING\r\n");
    input.extend(encode_command(&["ECHO", ""]));
    input.extend(encode_command(&["DEL", "k1", "k2", "big"]));
    input.extend(encode_command(&["GET", "k1"]));
    input
}

#[test]
fn pipeline_split_across_tiny_writes() {
    let mut d = Diff::new();
    let input = mixed_pipeline();
    for chunk in [1, 2, 3, 7, 64, 1000] {
        d.run_raw_chunked(&input, chunk);
    }
}

#[test]
fn deep_pipeline_of_10k_pings_in_one_write() {
    let mut d = Diff::new();
    let replies = d.run_raw(&ping_frame().repeat(10_000));
    assert_eq!(replies.len(), b"+PONG\r\n".len() * 10_000);
    d.run_raw(&b"PING\r\n".repeat(10_000));
}

#[test]
fn deep_pipeline_of_sets_then_gets() {
    let mut d = Diff::new();
    let mut sets = Vec::new();
    let mut gets = Vec::new();
    for i in 0..5000 {
        let key = format!("key:{i}");
        let value = format!("value-{i}-{}", "x".repeat(i % 97));
        sets.extend(encode_command(&["SET", key.as_str(), value.as_str()]));
        gets.extend(encode_command(&["GET", key.as_str()]));
    }
    d.run_raw(&sets);
    d.run_raw(&gets);
}

// --- RESP3 and HELLO ---------------------------------------------------------------------------------------

/// HELLO's reply holds server-specific fields (server, version, id): check its shape, not its bytes.
fn is_hello_reply(proto: i64) -> impl Fn(&Reply) -> bool {
    move |reply: &Reply| {
        let shape_ok = match proto {
            3 => matches!(reply, Reply::Map(_)),
            _ => matches!(reply, Reply::Array(Some(_))),
        };
        shape_ok
            && reply.get("proto").and_then(Reply::as_int) == Some(proto)
            && reply.get("server").and_then(Reply::as_bytes).is_some()
            && reply.get("version").and_then(Reply::as_bytes).is_some()
            && reply.get("id").and_then(Reply::as_int).is_some()
            && reply.get("mode").and_then(Reply::as_bytes) == Some(b"standalone".as_slice())
            && reply.get("role").and_then(Reply::as_bytes) == Some(b"master".as_slice())
            && reply.get("modules").and_then(Reply::as_array).is_some()
    }
}

#[test]
fn hello_3_switches_to_resp3_replies() {
    let mut d = Diff::new();
    d.run_matching(&["HELLO"], is_hello_reply(2));
    d.run_matching(&["HELLO", "3"], is_hello_reply(3));
    d.run(&["PING"]);
    d.run(&["SET", "a", "1"]);
    d.run(&["GET", "a"]);
    d.run(&["GET", "missing"]);
    d.run(&["MGET", "a", "missing"]);
    d.run(&["CONFIG", "GET", "appendonly"]);
    d.run(&["EXISTS", "a", "missing"]);
    d.run(&["DEL", "a"]);
    d.run(&["nosuchcommand"]);
    d.run(&["GET"]);
    d.run_matching(&["HELLO", "2"], is_hello_reply(2));
    d.run(&["GET", "missing"]);
    d.run(&["CONFIG", "GET", "appendonly"]);
}

#[test]
fn resp3_aggregate_replies_match_redis() {
    // RESP3 types produced by the families Strata has: maps (CONFIG GET, LCS IDX), nulls for missing
    // keys and missing array elements, arrays of bulk strings. Sets and doubles come with the set
    // and sorted-set families and are diffed there.
    let mut d = Diff::new();
    d.run_matching(&["HELLO", "3"], is_hello_reply(3));
    d.run(&["CONFIG", "GET", "maxmemory-policy"]);
    d.run(&["SET", "{t}a", "ohmytext"]);
    d.run(&["SET", "{t}b", "mynewtext"]);
    d.run(&["LCS", "{t}a", "{t}b", "IDX", "WITHMATCHLEN"]);
    d.run(&["GET", "missing"]);
    d.run(&["MGET", "{t}a", "missing", "{t}b"]);
    d.run(&["GETEX", "missing"]);
    d.run(&["TTL", "{t}a"]);
}

#[test]
fn hello_rejects_bad_arguments() {
    let mut d = Diff::new();
    d.run(&["HELLO", "4"]);
    d.run(&["HELLO", "1"]);
    d.run(&["HELLO", "0"]);
    d.run(&["HELLO", "abc"]);
    d.run(&["HELLO", "3", "FOO"]);
    d.run(&["HELLO", "3", "AUTH"]);
    d.run(&["HELLO", "3", "AUTH", "default"]);
    d.run(&["HELLO", "3", "SETNAME"]);
    // The connection is still in RESP2 after the errors.
    d.run(&["GET", "missing"]);
}

#[test]
fn hello_auth_with_requirepass() {
    let mut d = Diff::with_config(&["--requirepass", "s3cret"]);
    d.run(&["PING"]);
    d.run(&["GET", "a"]);
    // An unknown command is reported as unknown even before authentication.
    d.run(&["foo"]);
    d.run(&["HELLO", "3"]);
    d.run(&["HELLO", "3", "AUTH", "default", "wrong"]);
    d.run(&["HELLO", "3", "AUTH", "nouser", "s3cret"]);
    d.run(&["HELLO", "4", "AUTH", "default", "s3cret"]);
    d.run(&["PING"]);
    d.run(&["AUTH", "wrong"]);
    d.run(&["AUTH", "a", "b", "c"]);
    d.run_matching(
        &["HELLO", "3", "AUTH", "default", "s3cret"],
        is_hello_reply(3),
    );
    d.run(&["GET", "a"]);
    d.run(&["PING"]);

    let mut other = d.new_conns();
    other.run(&["AUTH", "s3cret"]);
    other.run(&["GET", "a"]);
    let mut third = d.new_conns();
    third.run(&["AUTH", "default", "s3cret"]);
    third.run(&["PING"]);
}

// --- resource limits (strata only) -------------------------------------------------------------------------

#[test]
fn huge_announced_lengths_do_not_grow_memory() {
    const CLIENTS: usize = 16;
    const BOUND: u64 = 64 << 20;
    let server = Server::strata(&["--threads", "2"]);
    let mut probe = server.conn();
    assert_eq!(probe.call(&["PING"]), b"+PONG\r\n");
    let before = server.rss_bytes();

    // Each client announces 2^31-1 arguments, the first one 512 MB long, then trickles a little data.
    let mut liars: Vec<Conn> = (0..CLIENTS).map(|_| server.conn()).collect();
    for liar in &mut liars {
        liar.send_raw(b"*2147483647\r\n$536870911\r\n");
    }
    for liar in &mut liars {
        liar.send_raw(&b"x".repeat(64 * 1024));
    }
    // Another client is still served while they wait.
    assert_eq!(probe.call(&["PING"]), b"+PONG\r\n");
    probe.call(&["SET", "after", "liars"]);
    assert_eq!(probe.call(&["GET", "after"]), b"$5\r\nliars\r\n");
    let after = server.rss_bytes();
    assert!(
        after <= before + BOUND,
        "RSS grew from {} KiB to {} KiB after {CLIENTS} clients announced huge lengths",
        before / 1024,
        after / 1024
    );
    for liar in &mut liars {
        assert!(
            !liar.is_closed_within(std::time::Duration::from_millis(10)),
            "a waiting client was dropped"
        );
    }
    drop(liars);
    assert_eq!(server.conn().call(&["PING"]), b"+PONG\r\n");
}

#[test]
fn many_clients_interleave_on_one_server() {
    let d = Diff::new();
    let mut pairs: Vec<Pair> = (0..8).map(|_| d.new_conns()).collect();
    for round in 0..20 {
        for (i, pair) in pairs.iter_mut().enumerate() {
            let key = format!("client:{i}");
            let value = format!("{round}");
            pair.run(&["SET", key.as_str(), value.as_str()]);
        }
        for (i, pair) in pairs.iter_mut().enumerate() {
            let key = format!("client:{}", (i + 1) % 8);
            pair.run(&["GET", key.as_str()]);
        }
    }
}

#[test]
fn auth_then_a_long_command_in_the_same_write() {
    // The limits on unauthenticated requests (at most 10 arguments) stop applying as soon as AUTH
    // has run, even for the rest of the same read.
    let d = Diff::with_config(&["--requirepass", "pw"]);
    let mut mset = vec!["MSET".to_string()];
    for i in 0..6 {
        mset.push(format!("k{i}"));
        mset.push(format!("v{i}"));
    }
    let long = encode_command(&mset);
    for auth in [
        encode_command(&["AUTH", "pw"]),
        encode_command(&["AUTH", "default", "pw"]),
        // A failed AUTH leaves the limits in force: the long command is a protocol error.
        encode_command(&["AUTH", "wrong"]),
    ] {
        let mut input = auth;
        input.extend_from_slice(&long);
        input.extend_from_slice(&encode_command(&["GET", "k5"]));
        raw_case(&d, &input);
    }
    // HELLO ... AUTH too (its reply carries the client id, so only Strata's tail is compared).
    let mut c = d.strata_server.conn();
    let mut input = encode_command(&["HELLO", "2", "AUTH", "default", "pw"]);
    input.extend_from_slice(&long);
    c.send_raw(&input);
    assert!(Reply::decode(&c.read_reply()).as_pairs().is_some());
    assert_eq!(c.read_reply(), b"+OK\r\n");
}

#[test]
fn options_match_up_to_their_first_nul_byte_as_in_redis() {
    // Redis matches options with `strcasecmp`, which stops at a NUL byte: `NX\0junk` is NX.
    // (Command and subcommand names are hashed over their whole length, then compared with
    // `strcasecmp`: `ENCODING\0` finds OBJECT ENCODING only when its hash, under the process's
    // random seed, lands in the same bucket. Strata never matches them; not compared here.)
    let mut d = Diff::new();
    let runs: &[&[&[u8]]] = &[
        &[b"SET", b"k", b"v", b"NX\0zz"],
        &[b"SET", b"k", b"w", b"XX\0", b"EX\0junk", b"100", b"GET\0"],
        &[b"TTL", b"k"],
        &[b"SET", b"k", b"v", b"N\0X"],
        &[b"EXPIRE", b"k", b"50", b"GT\0"],
        &[b"TTL", b"k"],
        &[b"ZADD", b"z", b"CH\0", b"1", b"a", b"2", b"b"],
        &[b"ZADD", b"z", b"INCR\0x", b"5", b"a"],
        &[b"ZRANGE", b"z", b"0", b"-1", b"WITHSCORES\0"],
        &[
            b"ZRANGE",
            b"z",
            b"(1",
            b"+inf",
            b"BYSCORE\0",
            b"LIMIT\0",
            b"0",
            b"1",
        ],
        &[
            b"ZUNIONSTORE",
            b"z2",
            b"1",
            b"z",
            b"WEIGHTS\0",
            b"2",
            b"AGGREGATE\0",
            b"MAX\0q",
        ],
        &[b"ZRANGE", b"z2", b"0", b"-1", b"WITHSCORES"],
        &[b"RPUSH", b"l", b"a", b"b", b"a"],
        &[b"LPOS", b"l", b"a", b"RANK\0x", b"2"],
        &[b"LINSERT", b"l", b"BEFORE\0", b"b", b"c"],
        &[b"LMOVE", b"l", b"l2", b"LEFT\0", b"RIGHT\0x"],
        &[b"LRANGE", b"l", b"0", b"-1"],
        &[b"HSET", b"h", b"f", b"1"],
        &[b"HRANDFIELD", b"h", b"1", b"WITHVALUES\0"],
        &[
            b"SCAN", b"0", b"MATCH\0", b"h*", b"COUNT\0", b"100", b"TYPE\0", b"hash",
        ],
        &[
            b"SORT", b"l2", b"ALPHA\0", b"DESC\0", b"LIMIT\0", b"0", b"5",
        ],
        &[b"BITCOUNT", b"k", b"0", b"1", b"BIT\0"],
        &[b"GEOADD", b"g", b"NX\0", b"13.36", b"38.11", b"p"],
        &[
            b"GEOSEARCH",
            b"g",
            b"FROMLONLAT\0",
            b"13.3",
            b"38.1",
            b"BYRADIUS\0",
            b"50",
            b"KM\0",
            b"ASC\0",
        ],
        &[b"CLIENT", b"NO-EVICT", b"on\0x"],
        &[b"CLIENT", b"REPLY", b"ON\0"],
        &[b"CLIENT", b"LIST", b"TYPE", b"normal\0x", b"ID", b"999999"],
        &[b"CLIENT", b"TRACKING", b"on\0", b"BCAST\0", b"NOLOOP\0"],
        &[b"CLIENT", b"TRACKING", b"off\0x"],
        &[b"COPY", b"k", b"k2", b"REPLACE\0"],
        &[b"FLUSHDB", b"ASYNC\0"],
        &[b"DBSIZE"],
    ];
    for args in runs {
        d.run(args);
    }
}
