//! ACL users (Redis 7.0's model): who a connection is, what it may run, which keys and
//! channels it may touch, and the log of what was refused.
//!
//! Design:
//! - A user is an `Arc<User>` shared by the registry and by every connection authenticated
//!   as it. Its rules sit behind a lock and are replaced whole by ACL SETUSER (built on a
//!   copy, so a bad rule changes nothing), so a change applies at once to the connections
//!   already authenticated, as in Redis.
//! - The hot path pays one relaxed atomic load: `User::is_open` is true while the user may
//!   run every command on every key and channel (the default user as shipped). Only a
//!   restricted user's commands take the lock and run [`check`].
//! - Command permissions are a set of the table's full names (`get`, `client|list`): the
//!   command table is the one place that knows commands, their subcommands and (through
//!   `acl_categories`) their categories; key positions come from `Spec::key_indexes`,
//!   channel positions from the table's `CHANNEL_*` flags.
//! - Keys: each key needs what its key spec's flags say (`keyspec.rs`, Redis's rule): read
//!   permission (`%R~` or `~`) if the command accesses its value, write permission (`%W~`
//!   or `~`) if it inserts, updates or deletes; SET's key needs both, LMOVE's destination
//!   only write, EXISTS's either.
//! - Passwords are kept only as SHA-256 digests, as Redis keeps them (`#<hex>` in ACL LIST
//!   and the ACL file).
//! - `requirepass` is the default user's password: setting it (at start-up or with CONFIG
//!   SET) replaces the default user's passwords, and an empty value makes it `nopass`.
//! - The log is bounded by `acllog-max-len`; entries that repeat (same reason, context,
//!   object and user within 60 s) are counted in one entry, as Redis groups them.
//!
//! - Selectors (Redis 7.0's `(` ... `)` rules) are more permission sets in `Rules`; a
//!   command runs if the root or any selector allows it with all its keys and channels.
//!
//! - First-argument rules (`+select|0`, deprecated in Redis 7.0 but supported): a command
//!   without subcommands, not allowed whole, runs when its first argument is one of the
//!   user's (`Rules::first_args`).
//!
//! Files: this one holds the users, the log and the ACL file; `rules.rs` one user's rules
//! (parsing, describing, checking); `sha256.rs` the password digest.

pub(crate) mod rules;
pub mod sha256;

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use abacus_protocol::Arg;
use parking_lot::{Mutex, RwLock, RwLockReadGuard};

use crate::command::Spec;

pub use rules::{category, check, hex, merge_selector_args, universe, Denied, KeyPattern, RuleError, Rules, CATEGORIES};

/// Log entries of the same kind within this window are one entry with a count (Redis's
/// ACL_LOG_GROUPING_MAX_TIME_DELTA).
const LOG_GROUPING_MS: u64 = 60_000;

/// One user. Connections hold it; its rules change in place.
pub struct User {
    pub name: String,
    rules: RwLock<Rules>,
    open: AtomicBool,
}

impl User {
    pub fn new(name: &str, rules: Rules) -> User {
        let open = AtomicBool::new(rules.is_open());
        User { name: name.to_string(), rules: RwLock::new(rules), open }
    }

    /// No check needed: every command, key and channel allowed. The hot path's only cost.
    #[inline]
    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::Relaxed)
    }

    pub fn rules(&self) -> RwLockReadGuard<'_, Rules> {
        self.rules.read()
    }

    pub fn set_rules(&self, rules: Rules) {
        let mut r = self.rules.write();
        self.open.store(rules.is_open(), Ordering::Relaxed);
        *r = rules;
    }

    pub fn check(&self, spec: &Spec, args: &[Arg]) -> Result<(), Denied> {
        if self.is_open() {
            return Ok(());
        }
        check(&self.rules.read(), spec, args)
    }
}

/// One ACL LOG entry.
pub struct LogEntry {
    pub count: u64,
    pub reason: &'static str,
    /// `toplevel`, `multi`, `lua`.
    pub context: &'static str,
    pub object: Vec<u8>,
    pub username: Vec<u8>,
    pub created_ms: u64,
    pub client_info: String,
}

/// The users and the log.
pub struct Acl {
    users: RwLock<BTreeMap<String, Arc<User>>>,
    default: Arc<User>,
    log: Mutex<VecDeque<LogEntry>>,
}

impl Default for Acl {
    fn default() -> Self {
        Acl::new()
    }
}

impl Acl {
    pub fn new() -> Acl {
        let default = Arc::new(User::new("default", Rules::default_user()));
        let mut users = BTreeMap::new();
        users.insert("default".to_string(), default.clone());
        Acl { users: RwLock::new(users), default, log: Mutex::new(VecDeque::new()) }
    }

    /// The users at start-up: the default user's password from `requirepass`, then the
    /// `aclfile` if one is configured (an error in it stops the start, as in Redis).
    pub fn at_startup(config: &abacus_engine::config::Config) -> Result<Acl, String> {
        let acl = Acl::new();
        acl.set_requirepass(config.requirepass().as_deref());
        let path = config.get(abacus_engine::param!("aclfile"));
        if !path.is_empty() {
            let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read the ACL file '{path}': {e}"))?;
            let users = parse_file(&path, &text)?;
            // The file's default user, if any, replaces the one requirepass set.
            if users.iter().any(|(n, _)| n == "default") {
                acl.replace_all(users);
            } else {
                let default = acl.default.rules().clone();
                let mut all = users;
                all.push(("default".to_string(), default));
                acl.replace_all(all);
            }
        }
        Ok(acl)
    }

    pub fn default_user(&self) -> Arc<User> {
        self.default.clone()
    }

    pub fn get(&self, name: &[u8]) -> Option<Arc<User>> {
        let name = std::str::from_utf8(name).ok()?;
        self.users.read().get(name).cloned()
    }

    /// All users, by name.
    pub fn users(&self) -> Vec<Arc<User>> {
        self.users.read().values().cloned().collect()
    }

    /// Whether a new connection starts unauthenticated: the default user needs a password
    /// or is off (Redis's authRequired).
    pub fn auth_required(&self) -> bool {
        let r = self.default.rules();
        !r.nopass || !r.enabled
    }

    /// `requirepass`: the default user's password (None: nopass).
    pub fn set_requirepass(&self, pass: Option<&str>) {
        let mut r = self.default.rules().clone();
        match pass {
            Some(p) => {
                r.nopass = false;
                r.passwords = vec![sha256::digest(p.as_bytes())];
            }
            None => {
                r.nopass = true;
                r.passwords.clear();
            }
        }
        self.default.set_rules(r);
    }

    /// The user `name` if it is on and `pass` is one of its passwords (or it is nopass).
    pub fn authenticate(&self, name: &[u8], pass: &[u8]) -> Option<Arc<User>> {
        let user = self.get(name)?;
        let ok = {
            let r = user.rules();
            r.enabled && r.password_ok(pass)
        };
        ok.then_some(user)
    }

    /// ACL SETUSER: applies `ops` to a copy of the user's rules (a new user's if it does not
    /// exist) and installs the result only if every rule was valid.
    pub fn set_user(&self, name: &str, ops: &[&[u8]]) -> Result<(), (usize, RuleError)> {
        let existing = self.users.read().get(name).cloned();
        let mut rules = match &existing {
            Some(u) => u.rules().clone(),
            None => Rules::new_user(),
        };
        for (i, op) in ops.iter().enumerate() {
            rules.apply(op).map_err(|e| (i, e))?;
        }
        match existing {
            Some(u) => u.set_rules(rules),
            None => {
                self.users.write().insert(name.to_string(), Arc::new(User::new(name, rules)));
            }
        }
        Ok(())
    }

    /// Removes a user (never the default one); the removed user, to disconnect its clients.
    pub fn remove(&self, name: &[u8]) -> Option<Arc<User>> {
        let name = std::str::from_utf8(name).ok()?;
        if name == "default" {
            return None;
        }
        self.users.write().remove(name)
    }

    /// Replaces every user with `loaded` (ACL LOAD, start-up); a default user missing from
    /// it gets the shipped rules. Returns the names of users that no longer exist.
    pub fn replace_all(&self, loaded: Vec<(String, Rules)>) -> Vec<String> {
        let mut users = self.users.write();
        let mut fresh: BTreeMap<String, Arc<User>> = BTreeMap::new();
        let mut default_rules = Rules::default_user();
        for (name, rules) in loaded {
            if name == "default" {
                default_rules = rules;
                continue;
            }
            // A user that stays keeps its object, so its connections follow the new rules.
            let user = match users.get(&name) {
                Some(u) => {
                    u.set_rules(rules);
                    u.clone()
                }
                None => Arc::new(User::new(&name, rules)),
            };
            fresh.insert(name, user);
        }
        self.default.set_rules(default_rules);
        fresh.insert("default".to_string(), self.default.clone());
        let gone = users.keys().filter(|n| !fresh.contains_key(*n)).cloned().collect();
        *users = fresh;
        gone
    }

    /// The ACL LIST lines.
    pub fn list(&self) -> Vec<String> {
        self.users().iter().map(|u| format!("user {} {}", u.name, u.rules().describe())).collect()
    }

    /// Adds a log entry, or counts it in a matching recent one (moved to the front).
    #[allow(clippy::too_many_arguments)]
    pub fn log(&self, reason: &'static str, context: &'static str, object: Vec<u8>, username: &[u8], client_info: String, now_ms: u64, max_len: usize) {
        let mut log = self.log.lock();
        let found = log.iter().position(|e| e.reason == reason && e.context == context && e.object == object && e.username == username && now_ms.saturating_sub(e.created_ms) <= LOG_GROUPING_MS);
        let entry = match found.and_then(|i| log.remove(i)) {
            Some(mut e) => {
                e.count = e.count.saturating_add(1);
                e.created_ms = now_ms;
                e.client_info = client_info;
                e
            }
            None => LogEntry { count: 1, reason, context, object, username: username.to_vec(), created_ms: now_ms, client_info },
        };
        log.push_front(entry);
        log.truncate(max_len);
    }

    /// The newest `count` entries.
    pub fn log_entries<R>(&self, count: usize, f: impl FnOnce(&mut dyn Iterator<Item = &LogEntry>) -> R) -> R {
        let log = self.log.lock();
        let mut it = log.iter().take(count);
        f(&mut it)
    }

    pub fn log_reset(&self) {
        self.log.lock().clear();
    }
}

/// Parses an ACL file: `user <name> <rules...>` lines; blank lines and `#` comments skipped.
/// Every error is reported (`path:line: reason`), and any error rejects the whole file.
pub fn parse_file(path: &str, text: &str) -> Result<Vec<(String, Rules)>, String> {
    let mut users: Vec<(String, Rules)> = Vec::new();
    let mut errors = String::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words: Vec<&str> = line.split_ascii_whitespace().collect();
        let lineno = n + 1;
        if words[0] != "user" || words.len() < 2 {
            errors.push_str(&format!("{path}:{lineno}: line should start with user keyword. "));
            continue;
        }
        let name = words[1];
        if users.iter().any(|(u, _)| u == name) {
            errors.push_str(&format!("{path}:{lineno}: Duplicate user '{name}' found. "));
            continue;
        }
        let mut rules = Rules::new_user();
        let mut bad = false;
        let ops: Vec<&[u8]> = words[2..].iter().map(|w| w.as_bytes()).collect();
        let merged = match rules::merge_selector_args(&ops) {
            Ok(m) => m,
            Err(i) => {
                errors.push_str(&format!("{path}:{lineno}: Unmatched parenthesis in acl selector starting at '{}'. ", words[2 + i]));
                continue;
            }
        };
        for w in &merged {
            if let Err(e) = rules.apply(w) {
                errors.push_str(&format!("{path}:{lineno}: {}. ", e.text()));
                bad = true;
                break;
            }
        }
        if !bad {
            users.push((name.to_string(), rules));
        }
    }
    if errors.is_empty() {
        Ok(users)
    } else {
        Err(errors.trim_end().to_string())
    }
}

/// Writes the users to `path` atomically (a temporary file renamed over it).
pub fn save_file(acl: &Acl, path: &str) -> std::io::Result<()> {
    let mut text = String::new();
    for line in acl.list() {
        text.push_str(&line);
        text.push('\n');
    }
    let tmp = format!("{path}.tmp-{}", std::process::id());
    std::fs::write(&tmp, text.as_bytes())?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_round_trip() {
        let acl = Acl::new();
        acl.set_user("alice", &[b"on", b">pw", b"~k*", b"&c", b"+get"]).unwrap();
        // A selector is written in parentheses, split over words, and read back whole.
        acl.set_user("bob", &[b"on", b"nopass", b"(%R~r* +@hash)", b"(~x &y +set)"]).unwrap();
        let text = acl.list().join("\n");
        assert!(text.contains("user bob on nopass resetchannels -@all (%R~r* resetchannels -@all +@hash) (~x resetchannels &y -@all +set)"), "{text}");
        let parsed = parse_file("f", &text).unwrap();
        let acl2 = Acl::new();
        acl2.replace_all(parsed);
        assert_eq!(acl2.list(), acl.list());
        assert!(acl2.authenticate(b"alice", b"pw").is_some());
        assert!(acl2.authenticate(b"alice", b"px").is_none());
        let e = parse_file("f", "user a on\nbogus\nuser b +nosuch\n").unwrap_err();
        assert!(e.contains("f:2:") && e.contains("f:3: Unknown command"), "{e}");
        let e = parse_file("f", "user a on (~x +get\n").unwrap_err();
        assert_eq!(e, "f:1: Unmatched parenthesis in acl selector starting at '(~x'.");
    }

    #[test]
    fn log_groups_repeats() {
        let acl = Acl::new();
        acl.log("key", "toplevel", b"k".to_vec(), b"u", "c1".into(), 1000, 10);
        acl.log("key", "toplevel", b"j".to_vec(), b"u", "c2".into(), 2000, 10);
        acl.log("key", "toplevel", b"k".to_vec(), b"u", "c3".into(), 3000, 10);
        let counts: Vec<(u64, Vec<u8>)> = acl.log_entries(10, |it| it.map(|e| (e.count, e.object.clone())).collect());
        assert_eq!(counts, vec![(2, b"k".to_vec()), (1, b"j".to_vec())]);
        // Past the grouping window it is a new entry; the log keeps max_len entries.
        acl.log("key", "toplevel", b"k".to_vec(), b"u", "c4".into(), 3000 + LOG_GROUPING_MS + 1, 2);
        let counts: Vec<u64> = acl.log_entries(10, |it| it.map(|e| e.count).collect());
        assert_eq!(counts, vec![1, 2]);
    }
}

