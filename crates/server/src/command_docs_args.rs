//! COMMAND DOCS's `history` and `arguments` of the commands Abacus shares with Redis: Redis
//! 7.0.15's, from a generated file (`command_docs_args.txt`, written by
//! `scripts/command_docs_args.py` from a running Redis; Redis is BSD-3-Clause and the texts
//! are its `src/commands/*.json`'s). Regenerate it with that script rather than editing it.
//!
//! Why a generated file: the argument trees are long (1,500 lines for Redis's commands) and
//! pure documentation, which client libraries and redis-cli's hints read and nothing here
//! acts on; transcribing them by hand would only add mistakes. The file is embedded in the
//! binary and parsed once, at the first COMMAND DOCS, into slices of it (no copies). Names in
//! it that are no Abacus command (Redis's scripting, cluster, ...) are never looked up.
//! Abacus's own commands have no entry: their COMMAND DOCS has no `arguments`, as a Redis
//! command without arguments has none.

use std::collections::HashMap;

const TEXT: &str = include_str!("command_docs_args.txt");

/// One argument: its fields in Redis's order (values as text; `flags` comma-separated) and,
/// for a `oneof` or `block`, its own arguments.
#[derive(Debug, Default)]
pub struct Argument {
    pub fields: Vec<(&'static str, &'static str)>,
    pub arguments: Vec<Argument>,
}

/// A command's history (version, description) and arguments.
#[derive(Debug, Default)]
pub struct CommandArgs {
    pub history: Vec<(&'static str, &'static str)>,
    pub arguments: Vec<Argument>,
}

/// The entry of a command by full name (`client|list`), if Redis has one.
pub fn of(name: &str) -> Option<&'static CommandArgs> {
    crate::command::facts().args.get(name)
}

/// Every command's history and arguments by full name: parsed once, with the command table's
/// other derived facts (`command::facts`).
pub fn build_all() -> HashMap<&'static str, CommandArgs> {
    parse(TEXT)
}

/// Parses the file's format (see the script). A malformed line is a bug in the generated
/// file, which the unit test below catches; it panics rather than serve wrong docs.
fn parse(text: &'static str) -> HashMap<&'static str, CommandArgs> {
    let mut out: HashMap<&'static str, CommandArgs> = HashMap::new();
    let mut current: Option<(&'static str, CommandArgs)> = None;
    for (n, line) in text.lines().enumerate() {
        let mut cells = line.split('\t');
        match cells.next() {
            Some("C") => {
                if let Some((name, entry)) = current.take() {
                    out.insert(name, entry);
                }
                let name = cells.next().unwrap_or_else(|| panic!("line {}: a command without a name", n + 1));
                current = Some((name, CommandArgs::default()));
            }
            Some("H") => {
                let (version, text) = (cells.next(), cells.next());
                let entry = current.as_mut().unwrap_or_else(|| panic!("line {}: history before a command", n + 1));
                entry.1.history.push((version.unwrap_or_default(), text.unwrap_or_default()));
            }
            Some("A") => {
                let depth: usize = cells.next().and_then(|d| d.parse().ok()).unwrap_or_else(|| panic!("line {}: no depth", n + 1));
                let fields = cells.map(|c| c.split_once('=').unwrap_or_else(|| panic!("line {}: a field without =", n + 1))).collect();
                let entry = current.as_mut().unwrap_or_else(|| panic!("line {}: an argument before a command", n + 1));
                // The argument list at `depth`: the last argument's, `depth` times down.
                let mut list = &mut entry.1.arguments;
                for _ in 0..depth {
                    list = &mut list.last_mut().unwrap_or_else(|| panic!("line {}: too deep", n + 1)).arguments;
                }
                list.push(Argument { fields, arguments: Vec::new() });
            }
            Some(c) if c.starts_with('#') || c.is_empty() => {}
            _ => panic!("line {}: unknown kind", n + 1),
        }
    }
    if let Some((name, entry)) = current.take() {
        out.insert(name, entry);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_parses_and_covers_the_shared_commands() {
        let table = parse(TEXT);
        let set = &table["set"];
        assert_eq!(set.history.first(), Some(&("2.6.12", "Added the `EX`, `PX`, `NX` and `XX` options.")));
        assert_eq!(set.arguments[0].fields, [("name", "key"), ("type", "key"), ("key_spec_index", "0")]);
        let expiration = set.arguments.iter().find(|a| a.fields[0] == ("name", "expiration")).unwrap();
        assert_eq!(expiration.arguments.len(), 5);
        assert_eq!(expiration.arguments[0].fields[2], ("token", "EX"));
        // Every Abacus command Redis 7.0 has is in the file (a command Redis added later
        // has no entry: regenerate from a newer Redis to document it).
        let commands: Vec<&str> = crate::command::all().flat_map(|c| std::iter::once(c).chain(c.subcommands.iter())).map(|s| s.name).collect();
        let found = commands.iter().filter(|n| table.contains_key(*n)).count();
        assert!(found > 250, "only {found} of {} commands in the file", commands.len());
    }

    #[test]
    fn nesting_follows_depth() {
        let table = parse("C\tx\nA\t0\tname=a\tflags=optional\nA\t1\tname=b\nA\t2\tname=c\nA\t1\tname=d\nA\t0\tname=e\nC\ty\nH\t1.0\tfirst\n");
        let x = &table["x"];
        assert_eq!(x.arguments.len(), 2);
        assert_eq!(x.arguments[0].arguments.len(), 2);
        assert_eq!(x.arguments[0].arguments[0].arguments[0].fields, [("name", "c")]);
        assert_eq!(x.arguments[0].fields[1], ("flags", "optional"));
        assert_eq!(table["y"].history, [("1.0", "first")]);
        assert!(table["y"].arguments.is_empty());
    }
}
