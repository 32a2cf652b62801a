//! COMMAND DOCS's `arguments`: the argument tree each table entry states in its `.args(..)`
//! ([`Doc::args`](abacus_commands::command::Doc::args)), parsed once when the server builds
//! the table's facts (`command::facts`) into slices of the entry's text (no copies).
//!
//! The notation, one argument a line: `name field=value...` in Redis's field order (`flags`
//! comma separated); a `oneof` or `block` argument's own arguments follow it indented two
//! spaces deeper. The shared commands' trees are Redis 7.0.15's (BSD-3-Clause, from its
//! `src/commands/*.json`): `scripts/command_docs.py` prints them from a running Redis.
//! A command without arguments (or one of Abacus's own that states none) has no
//! `arguments` field, as a Redis command without arguments has none.

use std::collections::HashMap;

use crate::command::Spec;

/// One argument: its fields in Redis's order (values as text; `flags` comma-separated) and,
/// for a `oneof` or `block`, its own arguments.
#[derive(Debug, Default)]
pub struct Argument {
    pub fields: Vec<(&'static str, &'static str)>,
    pub arguments: Vec<Argument>,
}

/// The arguments of a command by full name (`client|list`); empty when it states none.
pub fn of(name: &str) -> &'static [Argument] {
    crate::command::facts().args.get(name).map(|v| &v[..]).unwrap_or(&[])
}

/// Every command's arguments by full name: parsed once, with the command table's other
/// derived facts (`command::facts`).
pub fn build_all<'a>(specs: impl Iterator<Item = &'a Spec>) -> HashMap<&'static str, Vec<Argument>> {
    // A malformed tree is a bug in the entry, which the unit test below catches; at run
    // time the command then documents no arguments rather than take the server down.
    specs.map(|s| (s.name, parse(s.doc.args).unwrap_or_default())).collect()
}

/// Parses the notation (see the top of this file).
fn parse(text: &'static str) -> Result<Vec<Argument>, String> {
    let lines: Vec<(usize, &'static str)> = text.lines().filter(|l| !l.trim().is_empty()).map(|l| (l.len() - l.trim_start().len(), l.trim())).collect();
    let base = lines.iter().map(|(indent, _)| *indent).min().unwrap_or(0);
    let mut out: Vec<Argument> = Vec::new();
    for (indent, line) in lines {
        let depth = (indent - base) / 2;
        if (indent - base) % 2 != 0 {
            return Err(format!("odd indentation: {line:?}"));
        }
        let mut words = line.split(' ');
        let name = words.next().unwrap_or_default();
        let mut fields = vec![("name", name)];
        for w in words {
            fields.push(w.split_once('=').ok_or_else(|| format!("a field without =: {w:?} in {line:?}"))?);
        }
        // The argument list at `depth`: the last argument's, `depth` times down.
        let mut list = &mut out;
        for _ in 0..depth {
            list = &mut list.last_mut().ok_or_else(|| format!("too deep: {line:?}"))?.arguments;
        }
        list.push(Argument { fields, arguments: Vec::new() });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_is_documented() {
        use abacus_commands::command::ABACUS;
        for spec in crate::command::all().flat_map(|c| std::iter::once(c).chain(c.subcommands.iter())) {
            let d = &spec.doc;
            // Redis documents no complexity for a few commands (MONITOR, QUIT...); Abacus's
            // own commands all have one.
            assert!(!d.since.is_empty() && (!d.complexity.is_empty() || d.since != ABACUS), "{} has no docs", spec.name);
            assert!(matches!(d.doc_flags, "" | "deprecated" | "syscmd"), "{}", spec.name);
            assert_eq!(d.doc_flags == "deprecated", !d.deprecated_since.is_empty() && !d.replaced_by.is_empty(), "{}", spec.name);
            for t in d.tips.split_whitespace() {
                let ok = t == "nondeterministic_output" || t == "nondeterministic_output_order" || t.starts_with("request_policy:") || t.starts_with("response_policy:");
                assert!(ok, "{}: {t}", spec.name);
            }
        }
    }

    #[test]
    fn every_entry_parses_and_the_shared_commands_have_arguments() {
        let mut with_args = 0;
        for spec in crate::command::all().flat_map(|c| std::iter::once(c).chain(c.subcommands.iter())) {
            let args = parse(spec.doc.args).unwrap_or_else(|e| panic!("{}: {e}", spec.name));
            with_args += usize::from(!args.is_empty());
        }
        assert!(with_args > 200, "{with_args}");
        let set = crate::command::lookup(b"set").unwrap();
        assert_eq!(set.doc.history.first(), Some(&("2.6.12", "Added the `EX`, `PX`, `NX` and `XX` options.")));
        let args = parse(set.doc.args).unwrap();
        assert_eq!(args[0].fields, [("name", "key"), ("type", "key"), ("key_spec_index", "0")]);
        let expiration = args.iter().find(|a| a.fields[0] == ("name", "expiration")).unwrap();
        assert_eq!(expiration.arguments.len(), 5);
        assert_eq!(expiration.arguments[0].fields[2], ("token", "EX"));
    }

    #[test]
    fn nesting_follows_indentation() {
        let x = parse("\n    a flags=optional\n      b\n        c\n      d\n    e token==\n  ").unwrap();
        assert_eq!(x.len(), 2);
        assert_eq!(x[0].arguments.len(), 2);
        assert_eq!(x[0].arguments[0].arguments[0].fields, [("name", "c")]);
        assert_eq!(x[0].fields[1], ("flags", "optional"));
        assert_eq!(x[1].fields[1], ("token", "="));
        assert!(parse("a\n   b").is_err());
        assert!(parse("a\n  b c").is_err());
        assert!(parse("").unwrap().is_empty());
    }
}
