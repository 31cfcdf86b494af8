//! SORT and SORT_RO, reply for reply against redis-server: numeric and ALPHA order, ASC/DESC, LIMIT,
//! BY (weights in strings and hash fields, missing weights, "don't sort" patterns), GET (`#`, strings,
//! hash fields, missing keys), STORE (list result, empty result deleting the destination), every
//! error, and BY/GET/STORE keys on other shards (`--threads 4`).
//!
//! Ties are avoided where Redis's quicksort leaves them in an unspecified order (equal ALPHA
//! weights); numeric ties are ordered by the elements' bytes in both servers.

use crate::harness::{Diff, Pair};

fn setup(d: &mut Pair) {
    d.run(&["RPUSH", "l", "3", "1", "2", "10", "-1.5"]);
    d.run(&["RPUSH", "words", "pear", "apple", "fig", "banana"]);
    d.run(&["SADD", "s", "5", "3", "9", "1"]);
    d.run(&["SADD", "sw", "b", "a", "c"]);
    d.run(&["ZADD", "z", "1", "c", "2", "a", "3", "b"]);
    for (k, w) in [
        ("3", "30"),
        ("1", "5"),
        ("2", "20"),
        ("10", "1"),
        ("-1.5", "7"),
    ] {
        d.run(&["SET", &format!("w_{k}"), w]);
        d.run(&["SET", &format!("d_{k}"), &format!("data-{k}")]);
        d.run(&["HSET", &format!("h_{k}"), "f", w, "name", &format!("n{k}")]);
    }
}

fn check_all(d: &mut Pair) {
    for cmd in [
        &["SORT", "l"][..],
        &["SORT", "l", "DESC"],
        &["SORT", "l", "LIMIT", "1", "2"],
        &["SORT", "l", "LIMIT", "-5", "2"],
        &["SORT", "l", "LIMIT", "3", "-1"],
        &["SORT", "l", "LIMIT", "10", "5"],
        &["SORT", "l", "LIMIT", "0", "0"],
        &["SORT", "words", "ALPHA"],
        &["SORT", "words", "ALPHA", "DESC", "LIMIT", "1", "2"],
        &["SORT", "words"],
        &["SORT", "s"],
        &["SORT", "s", "DESC"],
        &["SORT", "sw", "ALPHA"],
        &["SORT", "z"],
        &["SORT", "z", "ALPHA"],
        &["SORT", "z", "BY", "nosort"],
        &["SORT", "z", "BY", "nosort", "DESC"],
        &["SORT", "z", "BY", "nosort", "LIMIT", "1", "5"],
        &["SORT", "z", "BY", "nosort", "DESC", "LIMIT", "1", "1"],
        &["SORT", "l", "BY", "nosort"],
        &["SORT", "l", "BY", "nosort", "DESC"],
        &["SORT", "l", "BY", "nosort", "DESC", "LIMIT", "1", "3"],
        &["SORT", "l", "BY", "w_*"],
        &["SORT", "l", "BY", "w_*", "DESC"],
        &["SORT", "l", "BY", "h_*->f"],
        &["SORT", "l", "BY", "h_*->name", "ALPHA"],
        &["SORT", "l", "BY", "missing_*"],
        &[
            "SORT",
            "l",
            "BY",
            "w_*",
            "GET",
            "#",
            "GET",
            "d_*",
            "GET",
            "h_*->name",
        ],
        &[
            "SORT",
            "l",
            "GET",
            "nokey_*",
            "GET",
            "h_*->nofield",
            "GET",
            "w_*->f",
        ],
        &["SORT", "l", "GET", "fixed"],
        &["SORT", "l", "BY", "w_*", "LIMIT", "1", "2", "GET", "d_*"],
        &["SORT_RO", "l", "BY", "w_*", "GET", "#"],
        &["SORT", "missing"],
        &["SORT", "missing", "BY", "w_*", "GET", "d_*"],
        // Errors.
        &["SORT", "words", "BY", "w_*"],
        &["SORT", "l", "LIMIT", "1"],
        &["SORT", "l", "LIMIT", "a", "1"],
        &["SORT", "l", "nosuch"],
        &["SORT", "l", "STORE"],
        &["SORT_RO", "l", "STORE", "dst"],
        &["SORT", "w_1"],
        &["SORT", "h_1"],
        &["SORT"],
    ] {
        d.run(cmd);
    }
    // STORE: a list result, LRANGE'd back; an empty result deletes the destination.
    d.run(&[
        "SORT", "l", "BY", "w_*", "GET", "d_*", "GET", "nokey_*", "STORE", "dst",
    ]);
    d.run(&["LRANGE", "dst", "0", "-1"]);
    d.run(&["TYPE", "dst"]);
    d.run(&["SET", "dst2", "x"]);
    d.run(&["SORT", "s", "STORE", "dst2"]);
    d.run(&["LRANGE", "dst2", "0", "-1"]);
    d.run(&["SORT", "sw", "BY", "nosort", "STORE", "dst3"]);
    d.run(&["LRANGE", "dst3", "0", "-1"]);
    d.run(&["SORT", "missing", "STORE", "dst"]);
    d.run(&["EXISTS", "dst"]);
    d.run(&["SORT", "l", "STORE", "a", "STORE", "b"]);
    d.run(&["EXISTS", "a", "b"]);
    d.run(&[
        "COMMAND", "GETKEYS", "SORT", "l", "GET", "store", "STORE", "x",
    ]);
}

#[test]
fn sort_on_one_thread_matches_redis() {
    let mut d = Diff::with_threads(1);
    setup(&mut d);
    check_all(&mut d);
}

#[test]
fn sort_with_keys_on_every_shard_matches_redis() {
    let mut d = Diff::with_threads(4);
    setup(&mut d);
    check_all(&mut d);
    d.run_matching(&["HELLO", "3"], |r| !r.is_error());
    d.run(&["SORT", "l", "BY", "w_*", "GET", "#", "GET", "nokey_*"]);
}

/// Redis reads elements and weights as C strings: a value ends at its first NUL byte (an empty
/// value is 0), so `"7\0junk"` sorts as 7 and a weight starting with NUL as 0. Large integer
/// elements sort as their exact values.
#[test]
fn values_with_nul_bytes_and_long_integers_sort_as_in_redis() {
    let mut d = Diff::with_threads(4);
    d.run(&[
        "RPUSH",
        "n",
        "7\0junk",
        "\0abc",
        "3",
        "-0",
        "123456789012345678",
        "5",
    ]);
    d.run(&["SORT", "n"]);
    d.run(&["SORT", "n", "DESC", "LIMIT", "1", "3"]);
    d.run(&["RPUSH", "m", "a", "b", "c"]);
    d.run(&["SET", "w_a", "\0\u{1}"]);
    d.run(&["SET", "w_b", "2\0x"]);
    d.run(&["SET", "w_c", "1"]);
    d.run(&["SORT", "m", "BY", "w_*"]);
    d.run(&["SORT", "m", "BY", "w_*", "GET", "#", "GET", "w_*"]);
    d.run(&["SET", "w_c", "x\0"]);
    d.run(&["SORT", "m", "BY", "w_*"]);
}

/// ALPHA without STORE compares C strings (`strcoll` in the C locale): values equal up to a NUL
/// byte tie and keep their order; with STORE the bytes decide, NULs included.
#[test]
fn alpha_compares_c_strings_unless_storing() {
    let mut d = Diff::with_threads(2);
    d.run(&["RPUSH", "q", "b", "\0\u{ff}", "", "a\0z", "a\0b", "a"]);
    d.run(&["SORT", "q", "ALPHA"]);
    d.run(&["SORT", "q", "ALPHA", "DESC"]);
    d.run(&["SORT", "q", "ALPHA", "LIMIT", "1", "3"]);
    d.run(&["SORT", "q", "ALPHA", "STORE", "q2"]);
    d.run(&["LRANGE", "q2", "0", "-1"]);
    d.run(&["SORT", "q", "ALPHA", "DESC", "STORE", "q2"]);
    d.run(&["LRANGE", "q2", "0", "-1"]);
    d.run(&["RPUSH", "m", "x", "y", "z"]);
    d.run(&["SET", "w_x", "k\0b"]);
    d.run(&["SET", "w_y", "k\0a"]);
    d.run(&["SET", "w_z", "k"]);
    d.run(&["SORT", "m", "BY", "w_*", "ALPHA"]);
    d.run(&["SORT", "m", "BY", "w_*", "ALPHA", "STORE", "m2"]);
    d.run(&["LRANGE", "m2", "0", "-1"]);
}

/// In Redis one BY without `*` means "don't sort" for good: a later BY only changes the pattern.
#[test]
fn a_bare_by_keeps_the_list_unsorted_whatever_comes_after() {
    let mut d = Diff::with_threads(2);
    d.run(&["RPUSH", "l", "3", "1", "2"]);
    d.run(&["SORT", "l", "BY", "nosort", "BY", "w_*"]);
    d.run(&["SORT", "l", "BY", "nosort", "BY", "*", "DESC"]);
    d.run(&["SORT", "l", "BY", "*", "BY", "nosort", "DESC"]);
    d.run(&[
        "SORT", "l", "BY", "nosort", "BY", "*", "DESC", "STORE", "dst",
    ]);
    d.run(&["LRANGE", "dst", "0", "-1"]);
}
