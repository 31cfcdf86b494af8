//! Reading redis.conf as redis-server does: the file's text, then the command line's
//! `--name value` options turned into more lines of the same text, each line split into words by
//! Redis's quoting rules ([`split_args`]) and applied in order. The first bad line stops the load
//! with Redis's report ([`ConfigFileError`]), naming the line as the combined text numbers it.
//!
//! Lines that are not settings: `include <file>` (loaded at that point, its own lines numbered
//! from 1), `rename-command <name> <new-name>`, `user <name> <rules...>` (both repeatable, kept in
//! order), and the directives Redis 7.0 reads and ignores (`specs::DEPRECATED`). A `save` line
//! replaces the schedule the first time and adds to it after, as Redis reads a file.

use std::fmt;

use super::{find, Config, DEPRECATED};

/// The version Redis's reports name: Strata answers as this Redis.
pub const REDIS_VERSION: &str = "7.0.15";

/// Why the configuration could not be loaded, as redis-server reports it on stderr before it
/// exits with status 1.
#[derive(Debug, PartialEq, Eq)]
pub struct ConfigFileError {
    report: String,
}

impl ConfigFileError {
    /// Redis's `*** FATAL CONFIG FILE ERROR ***` report for line `line` (1-based) of the text.
    fn at_line(line: usize, text: &str, reason: &str) -> ConfigFileError {
        ConfigFileError {
            report: format!(
                "\n*** FATAL CONFIG FILE ERROR (Redis {REDIS_VERSION}) ***\n\
                 Reading the configuration file, at line {line}\n>>> '{text}'\n{reason}\n"
            ),
        }
    }

    /// A file (the config file or an include) that cannot be read.
    fn unreadable(path: &str, err: &std::io::Error) -> ConfigFileError {
        ConfigFileError {
            report: format!(
                "Fatal error, can't open config file '{path}': {}\n",
                strerror(err)
            ),
        }
    }

    /// The whole text redis-server writes to stderr.
    pub fn report(&self) -> &str {
        &self.report
    }
}

impl fmt::Display for ConfigFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.report)
    }
}

/// C's `strerror` text of an I/O error ("No such file or directory"), without Rust's
/// " (os error 2)" suffix.
pub(super) fn strerror(err: &std::io::Error) -> String {
    let text = err.to_string();
    match text.find(" (os error") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// Splits a line into words as Redis's `sdssplitargs` does: words are separated by blanks;
/// `"..."` takes `\n \r \t \b \a`, `\xHH` and `\<any>` escapes; `'...'` takes `\'`; a closing
/// quote must be followed by a blank or the end. `None` on unbalanced quotes (Redis's
/// "Unbalanced quotes in configuration line").
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut words = Vec::new();
    let mut i = 0;
    let is_blank = |c: u8| matches!(c, b' ' | b'\n' | b'\r' | b'\t' | 0x0b | 0x0c);
    loop {
        while i < line.len() && is_blank(line[i]) {
            i += 1;
        }
        if i >= line.len() {
            return Some(words);
        }
        let mut word = Vec::new();
        let (mut in_double, mut in_single) = (false, false);
        loop {
            if in_double {
                let c = *line.get(i)?;
                if c == b'\\' && i + 3 < line.len() && line[i + 1] == b'x' {
                    let hex = |b: u8| (b as char).to_digit(16);
                    if let (Some(h), Some(l)) = (hex(line[i + 2]), hex(line[i + 3])) {
                        word.push((h * 16 + l) as u8);
                        i += 4;
                        continue;
                    }
                }
                if c == b'\\' && i + 1 < line.len() {
                    word.push(match line[i + 1] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                    i += 2;
                    continue;
                }
                if c == b'"' {
                    // The closing quote must end the word.
                    if i + 1 < line.len() && !is_blank(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                }
                word.push(c);
                i += 1;
            } else if in_single {
                let c = *line.get(i)?;
                if c == b'\\' && line.get(i + 1) == Some(&b'\'') {
                    word.push(b'\'');
                    i += 2;
                    continue;
                }
                if c == b'\'' {
                    if i + 1 < line.len() && !is_blank(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                }
                word.push(c);
                i += 1;
            } else {
                match line.get(i) {
                    None => break,
                    Some(&c) if is_blank(c) || c == 0 => break,
                    Some(b'"') => in_double = true,
                    Some(b'\'') => in_single = true,
                    Some(&c) => word.push(c),
                }
                i += 1;
            }
        }
        words.push(word);
    }
}

/// Redis's `sdscatrepr`: `s` in double quotes with escapes, as redis-server turns a command-line
/// value into config text.
fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for &b in s.as_bytes() {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
    out
}

/// The config text redis-server builds from its command line after the config file: each
/// `--name` starts a line, each other argument is added quoted. `--save` with no value is
/// `save ""`.
pub(super) fn options_text(args: &[String]) -> String {
    let mut out = String::new();
    let mut value_given = true;
    for (j, arg) in args.iter().enumerate() {
        if value_given && arg.starts_with("--") {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&arg[2..]);
            out.push(' ');
            let words = split_args(arg.as_bytes()).map_or(0, |w| w.len());
            if words == 1 {
                value_given = false;
                let is_save = arg.eq_ignore_ascii_case("--save");
                let next_is_option = args.get(j + 1).is_some_and(|a| a.starts_with("--"));
                if is_save && (next_is_option || j + 1 == args.len()) {
                    out.push_str("\"\"");
                    value_given = next_is_option;
                }
            }
        } else {
            out.push_str(&quote(arg));
            out.push(' ');
            value_given = true;
        }
    }
    out
}

/// Why a line stopped the load: a reason for Redis's report on that line, or an included file's
/// own report.
enum LineError {
    Reason(String),
    Report(ConfigFileError),
}

impl From<String> for LineError {
    fn from(reason: String) -> LineError {
        LineError::Reason(reason)
    }
}

/// One load of configuration text into a [`Config`] (the file with its includes, then the
/// command line), with what must be remembered across lines.
pub(super) struct Loader<'a> {
    pub config: &'a mut Config,
    /// Whether a command exists (`rename-command` refuses unknown commands).
    pub command_exists: &'a dyn Fn(&str) -> bool,
    /// A `save` line was read: the next ones add to the schedule instead of replacing it.
    pub save_loaded: bool,
    /// Include depth, to refuse a file that includes itself.
    pub depth: usize,
}

impl Loader<'_> {
    /// Reads `path` and loads its text; `options` (command-line text) follows the file's text.
    pub fn load_file(&mut self, path: &str, options: Option<&str>) -> Result<(), ConfigFileError> {
        let mut text = match std::fs::read(path) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) => return Err(ConfigFileError::unreadable(path, &e)),
        };
        if let Some(options) = options {
            text.push('\n');
            text.push_str(options);
        }
        self.load_text(&text)
    }

    /// Applies config text line by line.
    pub fn load_text(&mut self, text: &str) -> Result<(), ConfigFileError> {
        for (i, raw) in text.split('\n').enumerate() {
            let line = raw.trim_matches([' ', '\t', '\r', '\n']);
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            match self.load_line(line) {
                Ok(()) => {}
                Err(LineError::Reason(reason)) => {
                    return Err(ConfigFileError::at_line(i + 1, line, &reason))
                }
                Err(LineError::Report(report)) => return Err(report),
            }
        }
        Ok(())
    }

    fn load_line(&mut self, line: &str) -> Result<(), LineError> {
        let words = split_args(line.as_bytes())
            .ok_or_else(|| "Unbalanced quotes in configuration line".to_string())?
            .into_iter()
            .map(|w| String::from_utf8_lossy(&w).into_owned())
            .collect::<Vec<_>>();
        let Some((name, args)) = words.split_first() else {
            return Ok(());
        };
        let name = name.to_ascii_lowercase();
        if let Some(spec) = find(&name) {
            if !spec.multi_arg() && args.len() != 1 {
                return Err("wrong number of arguments".to_string().into());
            }
            let value = args.join(" ");
            let value = if spec.name == "save" {
                self.save_value(&value)?
            } else {
                value
            };
            return Ok(self.config.store(spec, &value)?);
        }
        if DEPRECATED.contains(&name.as_str()) && args.len() == 1 {
            return Ok(());
        }
        match (name.as_str(), args) {
            ("include", [path]) => {
                if self.depth >= 16 {
                    return Err("Too many nested includes".to_string().into());
                }
                self.depth += 1;
                let result = self.load_file(path, None);
                self.depth -= 1;
                // An included file's error is its own complete report.
                result.map_err(LineError::Report)
            }
            ("rename-command", [from, to]) => Ok(self.rename(from, to)?),
            ("user", [_, ..]) => {
                self.config.users.push(args.join(" "));
                Ok(())
            }
            _ => Err("Bad directive or wrong number of arguments"
                .to_string()
                .into()),
        }
    }

    /// The value a `save` line sets: the first line of a load replaces the schedule, the next
    /// add to it (Redis's file semantics); `save ""` empties it.
    fn save_value(&mut self, value: &str) -> Result<String, String> {
        let parsed = super::normalize_save(value)?;
        let first = !self.save_loaded;
        self.save_loaded = true;
        let current = self.config.get("save").unwrap_or_default();
        Ok(if first || parsed.is_empty() || current.is_empty() {
            parsed
        } else {
            format!("{current} {parsed}")
        })
    }

    fn rename(&mut self, from: &str, to: &str) -> Result<(), String> {
        let renamed = |name: &str| {
            let mut current = None;
            for (f, t) in &self.config.renames {
                if f.eq_ignore_ascii_case(name) {
                    current = Some(false);
                }
                if !t.is_empty() && t.eq_ignore_ascii_case(name) {
                    current = Some(true);
                }
            }
            current
        };
        let exists = |name: &str| renamed(name).unwrap_or_else(|| (self.command_exists)(name));
        if !exists(from) {
            return Err("No such command in rename-command".into());
        }
        if !to.is_empty() && exists(to) && !to.eq_ignore_ascii_case(from) {
            return Err("Target command name already exists".into());
        }
        self.config.renames.push((from.to_string(), to.to_string()));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(s: &str) -> Option<Vec<String>> {
        split_args(s.as_bytes()).map(|w| {
            w.into_iter()
                .map(|w| String::from_utf8_lossy(&w).into_owned())
                .collect()
        })
    }

    #[test]
    fn split_args_follows_sdssplitargs() {
        assert_eq!(
            split("  a  b\tc "),
            Some(vec!["a".into(), "b".into(), "c".into()])
        );
        assert_eq!(split(""), Some(vec![]));
        assert_eq!(split("save \"\""), Some(vec!["save".into(), "".into()]));
        assert_eq!(
            split(r#"x "a b\n\x41\"" 'it\'s' "\q""#),
            Some(vec![
                "x".into(),
                "a b\nA\"".into(),
                "it's".into(),
                "q".into()
            ])
        );
        // A quote may open in the middle of a word.
        assert_eq!(split("ab\"c d\""), Some(vec!["abc d".into()]));
        // A bad \x escape is taken literally, one character at a time.
        assert_eq!(split(r#""\xZZ""#), Some(vec!["xZZ".into()]));
        assert_eq!(split("'a\\b'"), Some(vec!["a\\b".into()]));
        for bad in ["\"abc", "'abc", "\"a\"b", "'a'b", "x \"", "\"\\\""] {
            assert_eq!(split(bad), None, "{bad}");
        }
    }

    #[test]
    fn command_line_becomes_config_text_as_in_redis() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            options_text(&args(&["--port", "7000", "--save", "", "--hz", "a b"])),
            "port \"7000\" \nsave \"\" \nhz \"a b\" "
        );
        assert_eq!(
            options_text(&args(&["--save", "--port", "1"])),
            "save \"\"\nport \"1\" "
        );
        assert_eq!(options_text(&args(&["--save"])), "save \"\"");
        assert_eq!(
            options_text(&args(&["--save", "900", "1", "--x", "q\"\u{1}"])),
            "save \"900\" \"1\" \nx \"q\\\"\\x01\" "
        );
    }
}
