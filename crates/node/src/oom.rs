//! `oom-score-adj`: the process's Linux OOM score, set from `oom-score-adj-values` as Redis's
//! `setOOMScoreAdj` (server.c) sets it. With the setting on, the score is the value of the
//! process's class (master, or replica when `replicaof` is set; Strata forks no background child,
//! so the third value is never used), added to the score the process had before Strata first
//! changed it (`relative`, also spelled `yes`) or as it is (`absolute`), clamped to -1000..1000.
//! Turned off again, the score goes back to what it was. Applied at start-up and by CONFIG SET of
//! either setting, which fails (and is rolled back) if the kernel refuses the write.

use std::sync::Mutex;

use crate::server_log;

const PATH: &str = "/proc/self/oom_score_adj";

/// The score the process had before Strata first changed it, while Strata has it changed.
static BASE: Mutex<Option<i64>> = Mutex::new(None);

/// Which of the three values applies.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Class {
    Master = 0,
    Replica = 1,
}

/// The kernel refused to read or write the score; the reason has been logged.
#[derive(Debug, PartialEq, Eq)]
pub struct Refused;

/// Sets the process's score for `mode` (`no`, `yes`/`relative`, `absolute`), `values` (the
/// setting's three numbers) and `class`.
pub fn apply(mode: &str, values: &str, class: Class) -> Result<(), Refused> {
    let mut base = BASE.lock().unwrap_or_else(|e| e.into_inner());
    let value = if mode == "no" {
        // Back to the score from before, if Strata had changed it.
        match base.take() {
            Some(b) => b,
            None => return Ok(()),
        }
    } else {
        let b = match *base {
            Some(b) => b,
            None => {
                let read = std::fs::read_to_string(PATH);
                let b = match read {
                    Ok(text) => text.trim().parse::<i64>().unwrap_or(0),
                    Err(e) => {
                        server_log!(Warning, "Unable to read oom_score_adj: {}", os_text(&e));
                        return Err(Refused);
                    }
                };
                *base = Some(b);
                b
            }
        };
        let v: i64 = values
            .split(' ')
            .nth(class as usize)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let v = if mode == "absolute" { v } else { v + b };
        v.clamp(-1000, 1000)
    };
    if let Err(e) = std::fs::write(PATH, format!("{value}\n")) {
        server_log!(Warning, "Unable to write oom_score_adj: {}", os_text(&e));
        return Err(Refused);
    }
    Ok(())
}

/// Redis's warning for values that a process without privileges cannot all reach (a replica's
/// below the master's, or the child's below the replica's); the values are kept.
pub fn warn_if_unordered(values: &str) {
    let v: Vec<i64> = values.split(' ').filter_map(|v| v.parse().ok()).collect();
    if v.len() == 3 && (v[1] < v[0] || v[2] < v[1]) {
        server_log!(
            Warning,
            "The oom-score-adj-values configuration may not work for non-privileged processes! Please consult the documentation."
        );
    }
}

fn os_text(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// The score as the kernel has it now.
pub fn current() -> Option<i64> {
    std::fs::read_to_string(PATH).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Relative, absolute and off, on this very process (a test binary): the score moves as
    /// Redis moves it and comes back. Lowering a score needs privileges, so only raises are
    /// asked for, from a base the test first raises itself (the kernel lets any process do that).
    #[test]
    fn scores_follow_the_mode_and_come_back_when_turned_off() {
        let Some(start) = current() else {
            return; // No /proc here.
        };
        let base = (start + 1).min(990);
        if std::fs::write(PATH, format!("{base}\n")).is_err() {
            return;
        }
        apply("yes", "5 6 7", Class::Master).unwrap();
        assert_eq!(current(), Some((base + 5).min(1000)));
        apply("relative", "8 9 10", Class::Replica).unwrap();
        assert_eq!(current(), Some((base + 9).min(1000)));
        apply("absolute", "995 996 997", Class::Master).unwrap();
        assert_eq!(current(), Some(995));
        apply("absolute", "5000 5000 5000", Class::Master).unwrap();
        assert_eq!(current(), Some(1000));
        apply("no", "0 0 0", Class::Master).unwrap();
        assert_eq!(current(), Some(base));
        // Off while already off changes nothing, whatever the score is meanwhile.
        std::fs::write(PATH, format!("{}\n", base + 2)).unwrap();
        apply("no", "1 1 1", Class::Master).unwrap();
        assert_eq!(current(), Some(base + 2));
        let _ = std::fs::write(PATH, format!("{start}\n"));
    }
}
