//! The process title (`ps`, /proc/PID/cmdline): `proc-title-template` expanded as Redis's
//! `expandProcTitleTemplate` does (`{title}` the command as started, `{listen-addr}`,
//! `{server-mode}`, `{port}`, `{tls-port}`, `{unixsocket}`, `{config-file}`), written over the
//! memory of the process's arguments as Redis's setproctitle.c does on Linux.
//!
//! The arguments and, right after them, the environment strings are one stretch of memory the
//! kernel shows as the command line; [`init`] (once, before any thread exists) gives every
//! environment variable a copy of its own elsewhere (`setenv`), which frees the whole stretch
//! for a title longer than the arguments. The kernel then reads the title up to its NUL. After
//! `init`, `std::env::args` would read the title, not the arguments: they are read before.

use std::sync::Mutex;

/// The stretch of memory the title goes in (address, length), and the command as started.
struct Area {
    start: usize,
    len: usize,
    argv0: String,
}

static AREA: Mutex<Option<Area>> = Mutex::new(None);

/// The fields of /proc/self/stat after the command name: arg_start, arg_end, env_start, env_end
/// are the 48th to 51st fields of the line.
fn stat_area() -> Option<(usize, usize, usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count from after it.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3.
    let field = |n: usize| fields.get(n - 3)?.parse::<usize>().ok();
    Some((field(48)?, field(49)?, field(50)?, field(51)?))
}

/// Takes over the memory of the arguments (and the environment right after them) for the title.
///
/// # Safety
/// No other thread may exist (the environment is rewritten), and nothing may read the process's
/// arguments through `argv` afterwards.
pub unsafe fn init() {
    let Some((arg_start, arg_end, env_start, env_end)) = stat_area() else {
        return;
    };
    if arg_end <= arg_start {
        return;
    }
    let argv0 = std::env::args_os()
        .next()
        .map(|a| a.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut end = arg_end;
    if env_start == arg_end && env_end > env_start {
        // Every variable gets a copy of its own (glibc's setenv allocates it), so the strings
        // left behind here are no one's.
        for (k, v) in std::env::vars_os() {
            // SAFETY: the caller's contract: no other thread reads or writes the environment.
            unsafe { std::env::set_var(k, v) };
        }
        end = env_end;
    }
    *AREA.lock().unwrap_or_else(|e| e.into_inner()) = Some(Area {
        start: arg_start,
        len: end - arg_start,
        argv0,
    });
}

/// The values the template's variables take.
pub struct Vars<'a> {
    pub port: i64,
    pub tls_port: i64,
    pub bind: &'a str,
    pub unixsocket: &'a str,
    pub config_file: &'a str,
    pub cluster: bool,
}

/// `template` with its variables replaced, trimmed of spaces (Redis's text); None for a template
/// `proc-title-template`'s check would refuse.
pub fn expand(template: &str, title: &str, v: &Vars<'_>) -> Option<String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        if let Some(quoted) = after.strip_prefix('{') {
            out.push('{');
            rest = quoted;
            continue;
        }
        let close = after.find('}')?;
        match &after[..close] {
            "title" => out.push_str(title),
            "listen-addr" if v.port != 0 || v.tls_port != 0 => {
                let first = v.bind.split_whitespace().next().unwrap_or("*");
                let port = if v.port != 0 { v.port } else { v.tls_port };
                out.push_str(&format!("{first}:{port}"));
            }
            "listen-addr" => out.push_str(&format!("unixsocket:{}", v.unixsocket)),
            "server-mode" if v.cluster => out.push_str("[cluster]"),
            "server-mode" => {}
            "port" => out.push_str(&v.port.to_string()),
            "tls-port" => out.push_str(&v.tls_port.to_string()),
            "unixsocket" => out.push_str(v.unixsocket),
            "config-file" => out.push_str(v.config_file),
            _ => return None,
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Some(out.trim_matches(' ').to_string())
}

/// Sets the title from `template`; nothing before [`init`] (tests, tools).
pub fn set(template: &str, v: &Vars<'_>) {
    let area = AREA.lock().unwrap_or_else(|e| e.into_inner());
    let Some(area) = area.as_ref() else {
        return;
    };
    let Some(title) = expand(template, &area.argv0, v) else {
        return;
    };
    let n = title.len().min(area.len - 1);
    // SAFETY: `init` took this stretch of the process's memory (the kernel's arg_start to
    // env_end, writable, and no one's but the title's since); writes stay within its length.
    unsafe {
        let p = area.start as *mut u8;
        std::ptr::copy_nonoverlapping(title.as_ptr(), p, n);
        std::ptr::write_bytes(p.add(n), 0, area.len - n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_expand_as_redis_expands_them() {
        let v = Vars {
            port: 6379,
            tls_port: 0,
            bind: "* -::*",
            unixsocket: "/tmp/s.sock",
            config_file: "/etc/redis.conf",
            cluster: false,
        };
        assert_eq!(
            expand("{title} {listen-addr} {server-mode}", "strata", &v).as_deref(),
            Some("strata *:6379")
        );
        assert_eq!(
            expand(
                "T {title} {listen-addr} {port} {tls-port} {unixsocket} {config-file} {{x}",
                "s",
                &v
            )
            .as_deref(),
            Some("T s *:6379 6379 0 /tmp/s.sock /etc/redis.conf {x}")
        );
        let unix_only = Vars {
            port: 0,
            cluster: true,
            ..v
        };
        assert_eq!(
            expand("{listen-addr} {server-mode}", "s", &unix_only).as_deref(),
            Some("unixsocket:/tmp/s.sock [cluster]")
        );
        assert_eq!(expand("{nope}", "s", &v), None);
    }
}
