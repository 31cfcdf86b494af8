//! Process lifecycle: start-up from a config file, graceful shutdown on SIGTERM and SIGINT, and
//! a slow command that does not stall other clients.

use std::time::Duration;

use crate::harness::{Server, TempDir};

fn assert_graceful_exit(signal: &str) {
    let mut s = Server::strata(&["--threads", "2"]);
    let mut c = s.conn();
    assert_eq!(c.call(&["SET", "k", "v"]), b"+OK\r\n");
    s.signal(signal);
    let status = s
        .wait_exit(Duration::from_secs(10))
        .expect("strata exits after the signal");
    assert!(
        status.success(),
        "exit status after SIG{signal}: {status:?}\n{}",
        s.log_tail()
    );
    assert!(s.log_tail().contains("ready to exit"), "{}", s.log_tail());
}

#[test]
fn sigterm_shuts_down_gracefully() {
    assert_graceful_exit("TERM");
}

#[test]
fn sigint_shuts_down_gracefully() {
    assert_graceful_exit("INT");
}

#[test]
fn config_file_then_flags_like_redis_server() {
    let dir = TempDir::new("conf");
    let conf = dir.path().join("strata.conf");
    std::fs::write(
        &conf,
        "# a redis.conf\ndatabases 4\nrequirepass \"from-file\"\n",
    )
    .unwrap();
    let s = Server::strata(&[conf.to_str().unwrap(), "--requirepass", "from-flag"]);
    let mut c = s.conn();
    assert!(c.call(&["PING"]).starts_with(b"-NOAUTH"));
    assert!(c.call(&["AUTH", "from-file"]).starts_with(b"-WRONGPASS"));
    assert_eq!(c.call(&["AUTH", "from-flag"]), b"+OK\r\n");
    assert_eq!(c.call(&["SELECT", "3"]), b"+OK\r\n");
    assert_eq!(
        c.call(&["SELECT", "4"]),
        b"-ERR DB index is out of range\r\n"
    );
}

#[test]
fn a_slow_command_does_not_stall_other_clients() {
    // DEBUG SLEEP parks only its own connection: while it is pending, other clients (keys on every
    // shard) are served. Checked by order of events, not by timing.
    let s = Server::strata(&["--threads", "2", "--enable-debug-command", "yes"]);
    let mut slow = s.conn();
    slow.send(&["DEBUG", "SLEEP", "30"]);
    let mut other = s.conn();
    for i in 0..200 {
        let key = format!("key:{i}");
        assert_eq!(other.call(&["SET", key.as_str(), "v"]), b"+OK\r\n");
    }
    assert_eq!(other.call(&["DBSIZE"]), b":200\r\n");
    slow.set_reply_timeout(Duration::from_millis(200));
    assert!(
        slow.try_read_reply().is_err(),
        "DEBUG SLEEP 30 answered early"
    );
}
