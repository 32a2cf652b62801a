//! One user's rules (Redis 7.0's flags and root selector): parsing ACL SETUSER's rules,
//! describing them back as Redis does (ACL LIST, GETUSER, the ACL file), and checking a
//! command, its keys and its channels against them.
//!
//! Commands are a set of the table's full names; categories come from the command table
//! (`acl_categories`), key positions from `Spec::key_indexes`, channel positions from the
//! table's `CHANNEL_*` flags: nothing here names a command.

use std::collections::{HashMap, HashSet};

use abacus_protocol::Arg;

use super::sha256;
use crate::command::{self, flags, Spec};

/// Redis 7.0's categories, in its order (ACL CAT).
pub const CATEGORIES: &[&str] = &[
    "keyspace", "read", "write", "set", "sortedset", "list", "hash", "string", "bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow", "blocking", "dangerous", "connection", "transaction", "scripting",
];

/// Every command and subcommand, sorted by name with each container followed by its
/// subcommands: the order ACL descriptions list single-command rules in.
pub fn universe() -> &'static [&'static Spec] {
    &command::facts().universe
}

/// [`universe`], built once with the command table's other derived facts (`command::facts`).
pub fn build_universe() -> Vec<&'static Spec> {
    let mut top: Vec<&'static Spec> = command::all().collect();
    top.sort_by_key(|s| s.name);
    top.into_iter().flat_map(|c| std::iter::once(c).chain(c.subcommands.iter())).collect()
}

/// The commands (full names) of each category.
fn category_members() -> &'static HashMap<&'static str, Vec<&'static Spec>> {
    &command::facts().categories
}

/// [`category_members`] of the commands of `universe`, built once (`command::facts`).
pub fn build_categories(universe: &[&'static Spec]) -> HashMap<&'static str, Vec<&'static Spec>> {
    let mut m: HashMap<&'static str, Vec<&'static Spec>> = CATEGORIES.iter().map(|c| (*c, Vec::new())).collect();
    for spec in universe {
        for c in crate::command_flags::acl_categories(spec) {
            if let Some(v) = m.get_mut(c) {
                v.push(spec);
            }
        }
    }
    m
}

/// The commands of a category (ACL CAT <category>), or None for an unknown one.
pub fn category(name: &str) -> Option<&'static [&'static Spec]> {
    category_members().get(name).map(|v| v.as_slice())
}

/// A command or subcommand by its full name (`get`, `client|list`).
fn lookup_full(name: &[u8]) -> Option<&'static Spec> {
    match name.iter().position(|&b| b == b'|') {
        None => command::lookup(name),
        Some(bar) => {
            let parent = command::lookup(&name[..bar])?;
            if parent.subcommands.is_empty() {
                return None;
            }
            parent.subcommand(&name[bar + 1..])
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPattern {
    pub pattern: Vec<u8>,
    pub read: bool,
    pub write: bool,
}

/// One user's rules (Redis's user flags and root selector).
#[derive(Clone, Debug, Default)]
pub struct Rules {
    pub enabled: bool,
    pub nopass: bool,
    /// `sanitize-payload` (Some(true)) / `skip-sanitize-payload` (Some(false)), as set.
    pub sanitize: Option<bool>,
    /// SHA-256 digests, in the order they were added.
    pub passwords: Vec<[u8; 32]>,
    /// `+@all` / `allcommands` was the last all-commands rule (Redis's "future commands").
    pub all_commands: bool,
    /// Allowed commands' full names. foldhash (as the command table): a restricted user's
    /// every command looks its name up here.
    pub allowed: HashSet<&'static str, foldhash::fast::FixedState>,
    /// Redis 7.0's (deprecated) first-argument rules, `+select|0`: a command without
    /// subcommands that is not allowed runs when its first argument is one of these
    /// (compared ignoring case, kept as written). By command name.
    pub first_args: HashMap<&'static str, Vec<Vec<u8>>>,
    pub all_keys: bool,
    pub keys: Vec<KeyPattern>,
    pub all_channels: bool,
    pub channels: Vec<Vec<u8>>,
    /// Redis 7.0's selectors (`(` ... `)` rules): more sets of command, key and channel
    /// permissions, each as the root's fields of a `Rules` (their own flags, passwords and
    /// selectors unused). A command runs if the root or any selector allows it whole.
    pub selectors: Vec<Rules>,
}

/// Why a rule was refused: Redis's texts for ACL SETUSER errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleError {
    Unknown,
    Syntax,
    KeyAfterAll,
    ChannelAfterAll,
    NoSuchPassword,
    BadHash,
    FirstArgOfSubcommand,
}

impl RuleError {
    pub fn text(self) -> &'static str {
        match self {
            RuleError::Unknown => "Unknown command or category name in ACL",
            RuleError::Syntax => "Syntax error",
            RuleError::KeyAfterAll => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::ChannelAfterAll => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
            RuleError::FirstArgOfSubcommand => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

fn parse_hash(h: &[u8]) -> Result<[u8; 32], RuleError> {
    if h.len() != 64 || !h.iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c)) {
        return Err(RuleError::BadHash);
    }
    let mut out = [0u8; 32];
    for (i, pair) in h.chunks(2).enumerate() {
        let v = |c: u8| if c.is_ascii_digit() { c - b'0' } else { c - b'a' + 10 };
        out[i] = (v(pair[0]) << 4) | v(pair[1]);
    }
    Ok(out)
}

pub fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

impl Rules {
    /// A user as ACL SETUSER creates it: off, no passwords, no commands, keys or channels
    /// (Redis 7.0's `acl-pubsub-default resetchannels`).
    pub fn new_user() -> Rules {
        Rules::default()
    }

    /// The default user as shipped: on, nopass, every command, key and channel.
    pub fn default_user() -> Rules {
        let mut r = Rules { enabled: true, nopass: true, ..Rules::default() };
        r.set_all_commands(true);
        r.all_keys = true;
        r.all_channels = true;
        r
    }

    fn set_all_commands(&mut self, allow: bool) {
        self.all_commands = allow;
        self.allowed.clear();
        self.first_args.clear();
        if allow {
            self.allowed.extend(universe().iter().map(|s| s.name));
        }
    }

    /// Allows or denies one command; a container's subcommands go with it. Either way the
    /// command's first-argument rules go (Redis's ACLChangeSelectorPerm).
    fn set_command(&mut self, spec: &'static Spec, allow: bool) {
        if !self.first_args.is_empty() {
            self.first_args.remove(spec.name);
        }
        for s in std::iter::once(spec).chain(spec.subcommands.iter()) {
            if allow {
                self.allowed.insert(s.name);
            } else {
                self.allowed.remove(s.name);
            }
        }
    }

    fn set_category(&mut self, cat: &str, allow: bool) -> Result<(), RuleError> {
        let members = category(cat).ok_or(RuleError::Unknown)?;
        for spec in members {
            self.set_command(spec, allow);
        }
        Ok(())
    }

    /// Applies one rule, as Redis's ACLSetUser.
    pub fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let lower = op.to_ascii_lowercase();
        match &lower[..] {
            b"on" => self.enabled = true,
            b"off" => self.enabled = false,
            b"sanitize-payload" => self.sanitize = Some(true),
            b"skip-sanitize-payload" => self.sanitize = Some(false),
            b"nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            b"resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            b"allkeys" | b"~*" | b"%rw~*" | b"%wr~*" => {
                self.all_keys = true;
                self.keys.clear();
            }
            b"resetkeys" => {
                self.all_keys = false;
                self.keys.clear();
            }
            b"allchannels" | b"&*" => {
                self.all_channels = true;
                self.channels.clear();
            }
            b"resetchannels" => {
                self.all_channels = false;
                self.channels.clear();
            }
            b"allcommands" | b"+@all" => self.set_all_commands(true),
            b"nocommands" | b"-@all" => self.set_all_commands(false),
            b"reset" => {
                for r in ["resetpass", "resetkeys", "resetchannels", "off", "sanitize-payload", "clearselectors", "-@all"] {
                    self.apply(r.as_bytes())?;
                }
            }
            b"clearselectors" => self.selectors.clear(),
            _ => return self.apply_pattern(op),
        }
        Ok(())
    }

    fn apply_pattern(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let (first, rest) = match op.split_first() {
            Some((f, r)) => (*f, r),
            None => return Err(RuleError::Syntax),
        };
        match first {
            b'>' => {
                let d = sha256::digest(rest);
                if !self.passwords.contains(&d) {
                    self.passwords.push(d);
                }
                self.nopass = false;
            }
            b'#' => {
                let d = parse_hash(rest)?;
                if !self.passwords.contains(&d) {
                    self.passwords.push(d);
                }
                self.nopass = false;
            }
            b'<' | b'!' => {
                let d = if first == b'<' { sha256::digest(rest) } else { parse_hash(rest)? };
                let before = self.passwords.len();
                self.passwords.retain(|p| *p != d);
                if self.passwords.len() == before {
                    return Err(RuleError::NoSuchPassword);
                }
            }
            b'~' | b'%' => {
                let (read, write, pattern) = if first == b'~' {
                    (true, true, rest)
                } else {
                    let tilde = rest.iter().position(|&c| c == b'~').ok_or(RuleError::Syntax)?;
                    let (mut r, mut w) = (false, false);
                    for c in &rest[..tilde] {
                        match c.to_ascii_uppercase() {
                            b'R' => r = true,
                            b'W' => w = true,
                            _ => return Err(RuleError::Syntax),
                        }
                    }
                    if !r && !w {
                        return Err(RuleError::Syntax);
                    }
                    (r, w, &rest[tilde + 1..])
                };
                if self.all_keys {
                    return Err(RuleError::KeyAfterAll);
                }
                if pattern == b"*" && read && write {
                    self.all_keys = true;
                    self.keys.clear();
                } else if let Some(k) = self.keys.iter_mut().find(|k| k.pattern == pattern) {
                    k.read |= read;
                    k.write |= write;
                } else {
                    self.keys.push(KeyPattern { pattern: pattern.to_vec(), read, write });
                }
            }
            b'&' => {
                if self.all_channels {
                    return Err(RuleError::ChannelAfterAll);
                }
                if !self.channels.iter().any(|c| c[..] == *rest) {
                    self.channels.push(rest.to_vec());
                }
            }
            b'+' | b'-' => {
                let allow = first == b'+';
                if let Some(cat) = rest.strip_prefix(b"@") {
                    let cat = std::str::from_utf8(cat).map_err(|_| RuleError::Unknown)?.to_ascii_lowercase();
                    return self.set_category(&cat, allow);
                }
                // `+cmd|arg` on a command without subcommands is Redis 7.0's first-argument
                // rule (ACLSetSelector splits at the last `|`); `-cmd|arg` only names a
                // subcommand.
                let last_bar = rest.iter().rposition(|&b| b == b'|');
                let Some(bar) = last_bar.filter(|_| allow) else {
                    let spec = lookup_full(rest).ok_or(RuleError::Unknown)?;
                    self.set_command(spec, allow);
                    return Ok(());
                };
                let (name, arg) = (&rest[..bar], &rest[bar + 1..]);
                let cmd = lookup_full(name).ok_or(RuleError::Unknown)?;
                if name.contains(&b'|') {
                    return Err(RuleError::FirstArgOfSubcommand);
                }
                if arg.is_empty() {
                    return Err(RuleError::Syntax);
                }
                if !cmd.subcommands.is_empty() {
                    let spec = lookup_full(rest).ok_or(RuleError::Unknown)?;
                    self.set_command(spec, allow);
                    return Ok(());
                }
                let list = self.first_args.entry(cmd.name).or_default();
                if !list.iter().any(|a| a.eq_ignore_ascii_case(arg)) {
                    list.push(arg.to_vec());
                }
            }
            b'(' if rest.last() == Some(&b')') => {
                // A selector: its rules apply to a fresh one (no commands, keys or
                // channels), and only selector rules are valid inside it.
                let mut selector = Rules::new_user();
                for word in rest[..rest.len() - 1].split(|c| c.is_ascii_whitespace()).filter(|w| !w.is_empty()) {
                    selector.apply_selector_rule(word)?;
                }
                self.selectors.push(selector);
            }
            _ => return Err(RuleError::Syntax),
        }
        Ok(())
    }

    /// Applies a rule inside a selector: permissions only (Redis's ACLSetSelector); a user
    /// rule (`on`, a password, `reset`, another selector) is a syntax error there.
    fn apply_selector_rule(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let lower = op.to_ascii_lowercase();
        let user_rule = matches!(&lower[..], b"on" | b"off" | b"nopass" | b"resetpass" | b"sanitize-payload" | b"skip-sanitize-payload" | b"reset" | b"clearselectors")
            || matches!(op.first(), Some(b'>' | b'#' | b'<' | b'!' | b'('));
        if user_rule {
            return Err(RuleError::Syntax);
        }
        self.apply(op)
    }

    /// Whether the user may run everything on everything: no check needed.
    pub(super) fn is_open(&self) -> bool {
        self.all_keys && self.all_channels && self.allowed.len() == universe().len()
    }

    /// The command rules as Redis 7.0 describes them: `+@all` or `-@all`, then each
    /// category that adds (removes) more commands than it would wrongly change, then the
    /// single commands that still differ.
    pub fn describe_commands(&self) -> String {
        let mut fake = Rules::default();
        fake.set_all_commands(self.all_commands);
        let mut out = vec![if self.all_commands { "+@all".to_string() } else { "-@all".to_string() }];
        let additive = !self.all_commands;
        for cat in CATEGORIES {
            let members = category(cat).unwrap_or(&[]);
            let on = members.iter().filter(|s| self.allowed.contains(s.name)).count();
            let off = members.len() - on;
            if (additive && on > off) || (!additive && off > on) {
                let _ = fake.set_category(cat, additive);
                out.push(format!("{}@{cat}", if additive { '+' } else { '-' }));
            }
        }
        for spec in universe() {
            let mine = self.allowed.contains(spec.name);
            if mine != fake.allowed.contains(spec.name) {
                out.push(format!("{}{}", if mine { '+' } else { '-' }, spec.name));
                fake.set_command(spec, mine);
            }
            // First-argument rules of a command not allowed whole, after it (Redis's
            // ACLDescribeSelectorCommandRulesSingleCommands).
            if !mine {
                for arg in self.first_args.get(spec.name).into_iter().flatten() {
                    out.push(format!("+{}|{}", spec.name, String::from_utf8_lossy(arg)));
                }
            }
        }
        debug_assert_eq!(fake.allowed, self.allowed, "the description must rebuild the rules");
        out.join(" ")
    }

    /// Key patterns as GETUSER shows them: `~*`, or each pattern with its permissions.
    pub fn describe_keys(&self) -> String {
        if self.all_keys {
            return "~*".to_string();
        }
        let parts: Vec<String> = self
            .keys
            .iter()
            .map(|k| {
                let prefix = match (k.read, k.write) {
                    (true, true) => "~",
                    (true, false) => "%R~",
                    _ => "%W~",
                };
                format!("{prefix}{}", String::from_utf8_lossy(&k.pattern))
            })
            .collect();
        parts.join(" ")
    }

    pub fn describe_channels(&self) -> String {
        if self.all_channels {
            return "&*".to_string();
        }
        let parts: Vec<String> = self.channels.iter().map(|c| format!("&{}", String::from_utf8_lossy(c))).collect();
        parts.join(" ")
    }

    /// GETUSER's flags.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        match self.sanitize {
            Some(false) => f.push("skip-sanitize-payload"),
            Some(true) => f.push("sanitize-payload"),
            None => {}
        }
        f
    }

    /// The rules as one line of rules (ACL LIST, the ACL file), which applied to a new user
    /// give these rules back.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self.flag_names().into_iter().map(String::from).collect();
        parts.extend(self.passwords.iter().map(|p| format!("#{}", hex(p))));
        parts.push(self.describe_permissions());
        // Each selector in parentheses, as Redis's ACLDescribeUser.
        parts.extend(self.selectors.iter().map(|sel| format!("({})", sel.describe_permissions())));
        parts.join(" ")
    }

    /// Keys, channels and commands, as one selector's rules.
    pub fn describe_permissions(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        let keys = self.describe_keys();
        if !keys.is_empty() {
            parts.push(keys);
        }
        if self.all_channels {
            parts.push("&*".into());
        } else {
            parts.push("resetchannels".into());
            let ch = self.describe_channels();
            if !ch.is_empty() {
                parts.push(ch);
            }
        }
        parts.push(self.describe_commands());
        parts.join(" ")
    }

    pub(super) fn password_ok(&self, pass: &[u8]) -> bool {
        self.nopass || self.passwords.contains(&sha256::digest(pass))
    }
}

/// What a check refused, with the argument index of the key or channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    Command,
    Key(usize),
    Channel(usize),
}

impl Denied {
    /// ACL LOG's `reason`.
    pub fn reason(self) -> &'static str {
        match self {
            Denied::Command => "command",
            Denied::Key(_) => "key",
            Denied::Channel(_) => "channel",
        }
    }

    /// The error a refused command gets (Redis 7.0's processCommand).
    pub fn error(self, spec: &Spec) -> String {
        match self {
            Denied::Command => format!("NOPERM this user has no permissions to run the '{}' command", spec.name),
            Denied::Key(_) => "NOPERM this user has no permissions to access one of the keys used as arguments".to_string(),
            Denied::Channel(_) => "NOPERM this user has no permissions to access one of the channels used as arguments".to_string(),
        }
    }

    /// The error a queued command gets at EXEC when the rules changed since it was queued.
    pub fn exec_error(self) -> &'static str {
        match self {
            Denied::Command => "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: no permission to execute the command or subcommand",
            Denied::Key(_) => "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: no permission to touch the specified keys",
            Denied::Channel(_) => "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: no permission to access one of the channels used as arguments",
        }
    }

    /// Redis's ordering of refusals across selectors: (kind, argument index).
    fn relevance(self) -> (u8, usize) {
        match self {
            Denied::Command => (1, 0),
            Denied::Key(i) => (2, i),
            Denied::Channel(i) => (4, i),
        }
    }

    /// ACL LOG's `object`: the command's name, or the key or channel.
    pub fn object(self, spec: &Spec, args: &[Arg]) -> Vec<u8> {
        match self {
            Denied::Command => spec.name.as_bytes().to_vec(),
            Denied::Key(i) | Denied::Channel(i) => args.get(i).map(|a| a.to_vec()).unwrap_or_default(),
        }
    }
}

/// Whether `rules` allow `spec` with `args`: the root permissions or any selector must allow
/// the command with all its keys and channels. When none does, the refusal reported is the
/// most relevant one, as Redis's ACLCheckAllUserCommandPerm picks it: a channel over a key
/// over a command, and among equals the one at the later argument.
pub fn check(rules: &Rules, spec: &Spec, args: &[Arg]) -> Result<(), Denied> {
    let mut worst = match check_selector(rules, spec, args) {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    for selector in &rules.selectors {
        match check_selector(selector, spec, args) {
            Ok(()) => return Ok(()),
            Err(e) if e.relevance() > worst.relevance() => worst = e,
            Err(_) => {}
        }
    }
    Err(worst)
}

/// Merges ACL SETUSER's (or an ACL file line's) arguments so that a selector split over
/// several, `(~key*` `+get)`, is one rule, `(~key* +get)`, as Redis's
/// ACLMergeSelectorArguments does. Err: the index of a selector never closed.
pub fn merge_selector_args(ops: &[&[u8]]) -> Result<Vec<Vec<u8>>, usize> {
    let mut out = Vec::with_capacity(ops.len());
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (i, op) in ops.iter().enumerate() {
        if let Some((_, sel)) = open.as_mut() {
            sel.push(b' ');
            sel.extend_from_slice(op);
            if op.last() == Some(&b')') {
                out.push(open.take().expect("open").1);
            }
        } else if op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((i, op.to_vec()));
        } else {
            out.push(op.to_vec());
        }
    }
    match open {
        Some((i, _)) => Err(i),
        None => Ok(out),
    }
}

/// Whether a first-argument rule (`+select|0`) allows a command not allowed whole.
fn first_arg_allowed(rules: &Rules, spec: &Spec, args: &[Arg]) -> bool {
    if rules.first_args.is_empty() {
        return false;
    }
    match (rules.first_args.get(spec.name), args.get(1)) {
        (Some(list), Some(first)) => list.iter().any(|a| a.eq_ignore_ascii_case(first)),
        _ => false,
    }
}

/// One selector's check: the command, then its keys, then its channels (Redis's order).
fn check_selector(rules: &Rules, spec: &Spec, args: &[Arg]) -> Result<(), Denied> {
    if !spec.has(flags::NO_AUTH) && !rules.allowed.contains(spec.name) && !first_arg_allowed(rules, spec, args) {
        return Err(Denied::Command);
    }
    let channels = spec.has(flags::CHANNEL_PUBLISH | flags::CHANNEL_SUBSCRIBE | flags::CHANNEL_PATTERN);
    if !rules.all_keys && !channels {
        // Each key needs what its key spec says it does (Redis's ACLSelectorCheckKey):
        // read permission if it is accessed, write permission if it is inserted into,
        // updated or deleted, either (any matching pattern) if neither (EXISTS, TYPE).
        for (i, f) in crate::keyspec::keys(spec, args) {
            let Some(key) = args.get(i) else { continue };
            if f & crate::keyspec::kf::NOT_KEY != 0 {
                continue;
            }
            let (read, write) = crate::keyspec::acl_needs(f);
            let ok = rules.keys.iter().any(|k| (!read || k.read) && (!write || k.write) && abacus_keyspace::glob_match(&k.pattern, key, false));
            if !ok {
                return Err(Denied::Key(i));
            }
        }
    }
    if !rules.all_channels && channels {
        let range = if spec.has(flags::CHANNEL_PUBLISH) { 1..args.len().min(2) } else { 1..args.len() };
        let literal = spec.has(flags::CHANNEL_PATTERN);
        for i in range {
            let ch = &args[i][..];
            // A pattern subscription must name one of the user's patterns exactly.
            let ok = rules.channels.iter().any(|p| if literal { p[..] == *ch } else { abacus_keyspace::glob_match(p, ch, false) });
            if !ok {
                return Err(Denied::Channel(i));
            }
        }
    }
    Ok(())
}


#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> abacus_protocol::Args {
        abacus_protocol::Args::from_vec(line.split(' ').map(|a| abacus_protocol::Bytes::copy_from_slice(a.as_bytes())).collect())
    }

    fn rules(ops: &str) -> Rules {
        let mut r = Rules::new_user();
        let words: Vec<&[u8]> = ops.split(' ').filter(|o| !o.is_empty()).map(str::as_bytes).collect();
        for op in merge_selector_args(&words).unwrap() {
            r.apply(&op).unwrap_or_else(|e| panic!("{}: {e:?}", String::from_utf8_lossy(&op)));
        }
        r
    }

    fn allowed(r: &Rules, line: &str) -> Result<(), Denied> {
        let a = args(line);
        let spec = command::lookup_call(&a).unwrap();
        check(r, spec, &a)
    }

    #[test]
    fn commands_and_categories() {
        let r = rules("+@hash -hget +get ~h");
        assert_eq!(allowed(&r, "hset h f v"), Ok(()));
        assert_eq!(allowed(&r, "hget h f"), Err(Denied::Command));
        assert_eq!(allowed(&r, "get k"), Err(Denied::Key(1)));
        assert_eq!(allowed(&r, "set k v"), Err(Denied::Command));
        let r = rules("+client|list ~*");
        assert_eq!(allowed(&r, "client list"), Ok(()));
        assert_eq!(allowed(&r, "client kill 1.2.3.4:5"), Err(Denied::Command));
        let r = rules("+client -client|kill allkeys");
        assert_eq!(allowed(&r, "client id"), Ok(()));
        assert_eq!(allowed(&r, "client kill 1.2.3.4:5"), Err(Denied::Command));
        // AUTH and HELLO are never refused.
        assert_eq!(allowed(&Rules::new_user(), "auth a b"), Ok(()));
    }

    #[test]
    fn first_argument_rules() {
        let r = rules("+select|0 +select|Ab +select|ab ~*");
        assert_eq!(allowed(&r, "select 0"), Ok(()));
        assert_eq!(allowed(&r, "select aB"), Ok(()));
        assert_eq!(allowed(&r, "select 1"), Err(Denied::Command));
        assert_eq!(r.describe_commands(), "-@all +select|0 +select|Ab");
        // The description rebuilds the same rules.
        assert_eq!(rules(&r.describe_commands()).first_args, r.first_args);
        // Allowing, denying or a category holding the command drops them.
        assert_eq!(rules("+select|0 +select").describe_commands(), "-@all +select");
        assert_eq!(rules("+select|0 -select").describe_commands(), "-@all");
        assert_eq!(rules("+select|0 +@all -@all").describe_commands(), "-@all");
        let mut r = Rules::new_user();
        assert_eq!(r.apply(b"+select|"), Err(RuleError::Syntax));
        assert_eq!(r.apply(b"-select|0"), Err(RuleError::Unknown));
        assert_eq!(r.apply(b"+config|set|x"), Err(RuleError::FirstArgOfSubcommand));
        assert_eq!(r.apply(b"+client|list"), Ok(()));
        assert!(r.first_args.is_empty());
    }

    #[test]
    fn selectors() {
        // Redis 7.0's replies for the same rules (checked against redis-server 7.0.15).
        let mut r = rules("on nopass ~b* +set");
        for op in ["(~a* +get)", "(%R~c* &ch +@hash)"] {
            r.apply(op.as_bytes()).unwrap();
        }
        assert_eq!(r.describe(), "on nopass ~b* resetchannels -@all +set (~a* resetchannels -@all +get) (%R~c* resetchannels &ch -@all +@hash)");
        assert_eq!(allowed(&r, "set b1 x"), Ok(()));
        assert_eq!(allowed(&r, "get a1"), Ok(()));
        // No selector allows it: the most relevant refusal (a key over a command).
        assert_eq!(allowed(&r, "get b1"), Err(Denied::Key(1)));
        assert_eq!(allowed(&r, "set a1 x"), Err(Denied::Key(1)));
        assert_eq!(allowed(&r, "hget c1 f"), Ok(()));
        assert_eq!(allowed(&r, "hset c1 f v"), Err(Denied::Key(1)));
        assert_eq!(allowed(&r, "lpush a1 x"), Err(Denied::Command));
        // The description rebuilds the same rules.
        let again = rules(&r.describe());
        assert_eq!(again.describe(), r.describe());
        for bad in ["(on)", "(>pw)", "(~a (~b))", "(nosuchrule)"] {
            assert_eq!(r.clone().apply(bad.as_bytes()), Err(RuleError::Syntax), "{bad}");
        }
        r.apply(b"clearselectors").unwrap();
        assert_eq!(r.describe(), "on nopass ~b* resetchannels -@all +set");
        assert_eq!(merge_selector_args(&[b"(~a*", b"+get)", b"on"]), Ok(vec![b"(~a* +get)".to_vec(), b"on".to_vec()]));
        assert_eq!(merge_selector_args(&[b"on", b"(~a*", b"x"]), Err(1));
    }

    #[test]
    fn keys_read_and_write() {
        let r = rules("+@all %R~r* %W~w* ~rw*");
        assert_eq!(allowed(&r, "get r1"), Ok(()));
        assert_eq!(allowed(&r, "get w1"), Err(Denied::Key(1)));
        assert_eq!(allowed(&r, "lpush w1 x"), Ok(()));
        assert_eq!(allowed(&r, "lpush r1 x"), Err(Denied::Key(1)));
        assert_eq!(allowed(&r, "mget rw1 w1"), Err(Denied::Key(2)));
        assert_eq!(allowed(&r, "del rw1 r2"), Err(Denied::Key(2)));
        // Per key spec: SET's key is overwritten (write), or with GET also read (both);
        // LMOVE's source accessed and deleted (both), its destination only inserted into;
        // EXISTS reads no value (either).
        assert_eq!(allowed(&r, "set w1 x"), Ok(()));
        assert_eq!(allowed(&r, "set w1 x get"), Err(Denied::Key(1)));
        assert_eq!(allowed(&r, "set rw1 x get"), Ok(()));
        assert_eq!(allowed(&r, "lmove w1 w2 left right"), Err(Denied::Key(1)));
        assert_eq!(allowed(&r, "lmove rw1 w2 left right"), Ok(()));
        assert_eq!(allowed(&r, "lmove rw1 r2 left right"), Err(Denied::Key(2)));
        assert_eq!(allowed(&r, "exists w1 r1"), Ok(()));
        assert_eq!(allowed(&r, "sort rw1 store r1"), Err(Denied::Key(3)));
        assert_eq!(allowed(&r, "sort r1 store w1"), Ok(()));
        assert_eq!(r.describe_keys(), "%R~r* %W~w* ~rw*");
        // The same pattern again merges its permissions.
        let r = rules("%R~a %W~a");
        assert_eq!(r.describe_keys(), "~a");
    }

    #[test]
    fn channels() {
        let r = rules("+@all allkeys &news.* &x");
        assert_eq!(allowed(&r, "publish news.1 m"), Ok(()));
        assert_eq!(allowed(&r, "publish other m"), Err(Denied::Channel(1)));
        assert_eq!(allowed(&r, "subscribe x news.2 y"), Err(Denied::Channel(3)));
        // A pattern subscription must match one of the patterns literally.
        assert_eq!(allowed(&r, "psubscribe news.*"), Ok(()));
        assert_eq!(allowed(&r, "psubscribe news.1*"), Err(Denied::Channel(1)));
        // Shard channels are channels, not keys.
        assert_eq!(allowed(&r, "spublish x m"), Ok(()));
    }

    #[test]
    fn rule_errors() {
        let mut r = Rules::new_user();
        assert_eq!(r.apply(b"foo"), Err(RuleError::Syntax));
        assert_eq!(r.apply(b"+nosuch"), Err(RuleError::Unknown));
        assert_eq!(r.apply(b"+@nosuch"), Err(RuleError::Unknown));
        assert_eq!(r.apply(b"+client|nosuch"), Err(RuleError::Unknown));
        assert_eq!(r.apply(b"%X~d"), Err(RuleError::Syntax));
        assert_eq!(r.apply(b"<nope"), Err(RuleError::NoSuchPassword));
        assert_eq!(r.apply(b"#abc"), Err(RuleError::BadHash));
        r.apply(b"allkeys").unwrap();
        assert_eq!(r.apply(b"~foo"), Err(RuleError::KeyAfterAll));
        r.apply(b"allchannels").unwrap();
        assert_eq!(r.apply(b"&foo"), Err(RuleError::ChannelAfterAll));
        assert_eq!(r.apply(b"(+get ~x"), Err(RuleError::Syntax));
    }

    #[test]
    fn descriptions_match_redis() {
        // Lines taken from redis-server 7.0.15's ACL LIST for the same rules.
        assert_eq!(Rules::default_user().describe(), "on nopass ~* &* +@all");
        assert_eq!(Rules::new_user().describe(), "off resetchannels -@all");
        assert_eq!(rules("+@all -@hash +hget").describe_commands(), "+@all -@hash +hget");
        let r = rules("on >p1 ~foo* %R~r* &ch* +get -@all +set +@hash -hget");
        assert_eq!(r.describe(), "on #f64551fcd6f07823cb87971cfb91446425da18286b3ab1ef935e0cbd7a69f68a ~foo* %R~r* resetchannels &ch* -@all +@hash -hget +set");
        // Every description rebuilds the same rules.
        for ops in ["+@all -@hash +hget", "+@read -get +client|list", "-@all +@write +@read -@dangerous", "+@all -client +client|id"] {
            let r = rules(ops);
            let again = rules(&r.describe_commands());
            assert_eq!(again.allowed, r.allowed, "{ops}");
        }
    }
}
