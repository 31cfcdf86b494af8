//! Generated documentation: the support matrix (docs/commands.md) and the settings reference
//! (docs/configuration.md) are produced from the command table and the config table, and a unit test
//! fails when the committed files are stale (`STRATA_UPDATE_DOCS=1 cargo test -p strata-commands docs`
//! rewrites them).

use strata_node::config::{Kind, ALIASES, SPECS};
use strata_node::table::{BeginSearch, CommandSpec, FindKeys, KeySpec};

/// One key spec in a few words: where its keys are, then their flags ("1..-1 step 2: OW update").
fn key_spec_text(k: &KeySpec) -> String {
    let start = match k.begin_search {
        BeginSearch::Index(i) => i.to_string(),
        BeginSearch::Keyword { keyword, startfrom } => {
            format!("after {keyword} (from {startfrom})")
        }
        BeginSearch::Unknown => "parsed".to_string(),
    };
    let run = match k.find_keys {
        FindKeys::Range {
            lastkey: 0,
            step: 1,
            limit: 0,
        } => String::new(),
        FindKeys::Range {
            lastkey,
            step,
            limit,
        } => {
            let mut s = format!("..{lastkey}");
            if step != 1 {
                s.push_str(&format!(" step {step}"));
            }
            if limit != 0 {
                s.push_str(&format!(" limit {limit}"));
            }
            s
        }
        FindKeys::Keynum {
            keynumidx,
            firstkey,
            step,
        } => format!(" numkeys at +{keynumidx}, keys from +{firstkey} step {step}"),
        FindKeys::Unknown => String::new(),
    };
    let flags: Vec<&str> = k.flags.names().collect();
    format!("{start}{run}: {}", flags.join(" "))
}

fn row(name: &str, spec: &CommandSpec) -> String {
    let flags = spec.flag_names();
    let keys = if spec.keys.is_empty() {
        "none".to_string()
    } else {
        spec.keys
            .iter()
            .map(key_spec_text)
            .collect::<Vec<_>>()
            .join("; ")
    };
    format!(
        "| `{}` | {} | {} | {} | {} | {} |\n",
        name.to_uppercase().replace('|', " "),
        spec.arity,
        if flags.is_empty() {
            "-".to_string()
        } else {
            flags.join(", ")
        },
        keys,
        spec.acl_categories().join(" "),
        spec.summary
    )
}

/// The support matrix: every command and subcommand Strata implements, grouped by family.
pub fn commands_markdown() -> String {
    let mut s = String::from(
        "# Supported commands\n\nGenerated from the command table (`crates/commands`); do not edit by hand.\n\
         Every command listed here is implemented with Redis 7.0 semantics and tested against redis-server.\n",
    );
    // Each group once, where it first appears (a family may list a command of another group).
    let mut groups: Vec<&str> = Vec::new();
    for c in crate::table().commands() {
        if !groups.contains(&c.group) {
            groups.push(c.group);
        }
    }
    for group in groups {
        s.push_str(&format!(
            "\n## {group}\n\n| command | arity | flags | keys | ACL categories | summary |\n|---|---|---|---|---|---|\n"
        ));
        let mut cmds: Vec<&CommandSpec> = crate::table()
            .commands()
            .iter()
            .copied()
            .filter(|c| c.group == group)
            .collect();
        cmds.sort_by_key(|c| c.name);
        for c in cmds {
            s.push_str(&row(c.name, c));
            let mut subs: Vec<&CommandSpec> = c.subcommands.iter().collect();
            subs.sort_by_key(|c| c.name);
            for sub in subs {
                s.push_str(&row(&format!("{} {}", c.name, sub.name), sub));
            }
        }
    }
    s
}

/// The settings reference.
pub fn configuration_markdown() -> String {
    let aliases: Vec<String> = ALIASES
        .iter()
        .map(|(old, new)| format!("`{old}` (`{new}`)"))
        .collect();
    let mut s = format!(
        "# Configuration\n\nGenerated from the settings table (`crates/node/src/config/specs.rs`); do not edit by hand.\n\n\
         Settings are read from a redis.conf-style file given as the first argument and from `--name value`\n\
         flags (flags win), exactly as `redis-server` takes them. Mutable settings can be changed with\n\
         `CONFIG SET`. A bad line stops start-up with Redis's `*** FATAL CONFIG FILE ERROR ***` report.\n\n\
         A setting whose status is *stored, inert until …* configures a feature Strata does not have yet:\n\
         its value is validated as Redis validates it, stored, shown by `CONFIG GET` and kept by\n\
         `CONFIG REWRITE`, and start-up warns about each such setting given a value other than its\n\
         default.\n\n\
         `CONFIG GET` with a pattern (`CONFIG GET *`) skips the hidden settings, as Redis does for its\n\
         own (`use-exit-on-panic`), and the Strata-only start-up settings (`threads`, `io-engine`), so\n\
         a Redis client walking the list sees nothing Redis would not show that CONFIG SET refuses;\n\
         `CONFIG GET` by exact name shows them. Numbers parse as Redis parses them: integers with\n\
         `string2ll` (no `+`, no leading zero), byte sizes with `memtoull` within Redis's bounds.\n\
         `dir` is the process's working directory, as in Redis: start-up and `CONFIG SET dir`\n\
         chdir() into it (relative file names such as `logfile` are inside it; CONFIG GET shows it\n\
         absolute); unlike Redis, start-up creates it when it does not exist.\n\n\
         Besides settings, the file may hold `include <file>`, `rename-command <command> <new-name>`\n\
         (applied at start-up as Redis does: the command answers only to its new name, `\"\"` removes it,\n\
         COMMAND and errors still name it by its own name) and `user <name> <rules...>` (stored;\n\
         inert until ACL), each repeatable; `list-max-ziplist-entries`, `list-max-ziplist-value` and\n\
         `lua-replicate-commands` are read and ignored, as Redis 7.0 does. Old names Redis still\n\
         accepts: {}.\n\n\
         | setting | default | type | runtime | status | Strata only | meaning |\n|---|---|---|---|---|---|---|\n",
        aliases.join(", "),
    );
    for spec in SPECS {
        let kind = match spec.kind {
            Kind::Int { min, max } => format!("integer {min}..{max}"),
            Kind::Octal { max } => format!("octal 0..{max:o}"),
            Kind::Memory => "bytes (k/kb/m/mb/g/gb)".into(),
            Kind::Bool => "yes/no".into(),
            Kind::Str => "string".into(),
            Kind::Enum(options) => options.join(" / "),
            Kind::OutputBufferLimit => "class hard soft seconds, ...".into(),
            Kind::KeyspaceEvents => "event classes".into(),
            Kind::Percentiles => "numbers 0..100".into(),
            Kind::MemoryOrPercent => "bytes, or N% of maxmemory".into(),
            Kind::Save => "seconds changes, ... (or \"\")".into(),
            Kind::ReplicaOf => "host port".into(),
            Kind::ShutdownFlags => "default / save nosave now force".into(),
        };
        let status = match spec.inert {
            Some(feature) => format!("stored, inert until {feature}"),
            None => "implemented".into(),
        };
        s.push_str(&format!(
            "| `{}` | `{}` | {} | {} | {} | {} | {} |\n",
            spec.name,
            spec.default,
            kind,
            if spec.mutable {
                "CONFIG SET"
            } else {
                "start-up"
            },
            status,
            if spec.strata_only { "yes" } else { "" },
            spec.help
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(file: &str, text: String) {
        let path = format!("{}/../../docs/{file}", env!("CARGO_MANIFEST_DIR"));
        if std::env::var_os("STRATA_UPDATE_DOCS").is_some() {
            std::fs::write(&path, &text).expect("write docs");
            return;
        }
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            current == text,
            "docs/{file} is stale: run STRATA_UPDATE_DOCS=1 cargo test -p strata-commands docs"
        );
    }

    #[test]
    fn docs_commands_md_is_current() {
        check("commands.md", commands_markdown());
    }

    #[test]
    fn docs_configuration_md_is_current() {
        check("configuration.md", configuration_markdown());
    }
}
