//! What every shard's Lua state shares: the script cache (EVAL's and SCRIPT LOAD's bodies by
//! SHA1), the FUNCTION libraries, the `math.random` generator, and the state of the script
//! now running (for `-BUSY`, SCRIPT KILL and FUNCTION KILL).
//!
//! Scripts whose keys are on one shard run in parallel on their shards' threads; the
//! generator is an atomic, so each draw advances the one sequence (as Redis's single
//! `redisLrand48`). The running scripts are a small map under a mutex, read by connections
//! only while a script runs (answering `-BUSY`, SCRIPT KILL).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use abacus_protocol::Bytes;
use parking_lot::{Mutex, RwLock};

/// The SHA1 of a script body, as 40 lowercase hex digits (EVALSHA, SCRIPT LOAD).
pub fn sha1_hex(body: &[u8]) -> String {
    sha1_smol::Sha1::from(body).digest().to_string()
}

/// One function of a library, as FUNCTION LIST shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionMeta {
    pub name: String,
    pub description: Option<String>,
    pub flags: Vec<String>,
}

/// A library loaded by FUNCTION LOAD: its code and the functions it registered.
#[derive(Clone, Debug)]
pub struct Library {
    pub name: String,
    pub code: Bytes,
    pub functions: Vec<FunctionMeta>,
    /// Unique per load: a shard's Lua state compiled this library if it holds this id.
    pub id: u64,
}

/// The FUNCTION libraries, by name, and which library holds each function.
#[derive(Default, Debug, Clone)]
pub struct Libraries {
    pub libs: BTreeMap<String, Library>,
    pub by_function: HashMap<String, String>,
}

impl Libraries {
    pub fn function(&self, name: &str) -> Option<(&Library, &FunctionMeta)> {
        let lib = self.libs.get(self.by_function.get(name)?)?;
        let f = lib.functions.iter().find(|f| f.name == name)?;
        Some((lib, f))
    }

    /// Adds (or replaces) `lib`. Errors as Redis: a name taken without REPLACE, a function
    /// name another library holds.
    pub fn add(&mut self, lib: Library, replace: bool) -> Result<(), String> {
        if self.libs.contains_key(&lib.name) && !replace {
            return Err(format!("ERR Library '{}' already exists", lib.name));
        }
        for f in &lib.functions {
            if let Some(holder) = self.by_function.get(&f.name) {
                if *holder != lib.name {
                    return Err(format!("ERR Function {} already exists", f.name));
                }
            }
        }
        self.remove(&lib.name);
        for f in &lib.functions {
            self.by_function.insert(f.name.clone(), lib.name.clone());
        }
        self.libs.insert(lib.name.clone(), lib);
        Ok(())
    }

    pub fn remove(&mut self, name: &str) -> Option<Library> {
        let lib = self.libs.remove(name)?;
        for f in &lib.functions {
            self.by_function.remove(&f.name);
        }
        Some(lib)
    }
}

/// The script that runs now.
#[derive(Clone, Debug)]
pub struct Running {
    /// `EVAL`-family or `FCALL`-family: which KILL command may stop it.
    pub function: bool,
    /// The script's SHA1 or the function's name.
    pub name: String,
    pub started_ms: u64,
}

/// A running script's record.
struct RunningScript {
    info: Running,
    kill: Arc<AtomicBool>,
    wrote: Arc<AtomicBool>,
}

/// State shared by every shard's Lua state (see the file comment).
pub struct Shared {
    scripts: RwLock<HashMap<String, Bytes>>,
    scripts_bytes: AtomicU64,
    pub libraries: RwLock<Libraries>,
    next_library_id: AtomicU64,
    /// `redisLrand48`'s 48-bit state: Redis seeds it once at start-up (the `drand48`
    /// default, 0x1234ABCD330E) and never again unless a script calls `math.randomseed`.
    rand48: AtomicU64,
    /// The scripts running now, by the shard whose thread runs each (scripts of one-shard
    /// keys run in parallel on their shards; a script with keys of several shards runs
    /// alone).
    running: Mutex<std::collections::BTreeMap<usize, RunningScript>>,
    /// How many scripts run: connections look at `running` only when it is not 0 (one load
    /// on their path).
    pub running_count: std::sync::atomic::AtomicUsize,
    /// Heap limit of each Lua state, bytes (0: none).
    pub heap_limit: AtomicU64,
    /// Each shard's Lua heap after its last script (INFO `used_memory_lua` sums them).
    lua_heaps: Mutex<HashMap<usize, u64>>,
}

impl Default for Shared {
    fn default() -> Self {
        Shared {
            scripts: RwLock::default(),
            scripts_bytes: AtomicU64::new(0),
            libraries: RwLock::default(),
            next_library_id: AtomicU64::new(1),
            rand48: AtomicU64::new(0x1234_ABCD_330E),
            running: Mutex::new(std::collections::BTreeMap::new()),
            running_count: std::sync::atomic::AtomicUsize::new(0),
            heap_limit: AtomicU64::new(0),
            lua_heaps: Mutex::new(HashMap::new()),
        }
    }
}

const LRAND48_MAX: u64 = i32::MAX as u64;

impl Shared {
    /// Every FUNCTION library's code, in name order (what snapshots hold).
    pub fn library_codes(&self) -> Vec<Bytes> {
        self.libraries.read().libs.values().map(|l| l.code.clone()).collect()
    }

    /// Caches a script body; returns its SHA1.
    pub fn add_script(&self, body: &[u8]) -> String {
        let sha = sha1_hex(body);
        let mut s = self.scripts.write();
        if !s.contains_key(&sha) {
            self.scripts_bytes.fetch_add((body.len() + sha.len() + 64) as u64, Ordering::Relaxed);
            s.insert(sha.clone(), Bytes::copy_from_slice(body));
        }
        sha
    }

    pub fn script(&self, sha: &str) -> Option<Bytes> {
        self.scripts.read().get(&sha.to_ascii_lowercase()).cloned()
    }

    pub fn has_script(&self, sha: &str) -> bool {
        self.scripts.read().contains_key(&sha.to_ascii_lowercase())
    }

    /// SCRIPT FLUSH.
    pub fn flush_scripts(&self) {
        self.scripts.write().clear();
        self.scripts_bytes.store(0, Ordering::Relaxed);
    }

    pub fn script_count(&self) -> usize {
        self.scripts.read().len()
    }

    /// Bytes the script cache holds (INFO `used_memory_scripts_eval`).
    pub fn scripts_bytes(&self) -> u64 {
        self.scripts_bytes.load(Ordering::Relaxed)
    }

    /// A script starts on `shard`'s thread. `kill` is its Lua state's kill flag (SCRIPT
    /// KILL sets it), `wrote` whether it has written (then it cannot be killed).
    pub fn start(&self, shard: usize, running: Running, kill: Arc<AtomicBool>, wrote: Arc<AtomicBool>) {
        self.running.lock().insert(shard, RunningScript { info: running, kill, wrote });
        self.running_count.fetch_add(1, Ordering::AcqRel);
    }

    /// The script on `shard` ended.
    pub fn finish(&self, shard: usize) {
        if self.running.lock().remove(&shard).is_some() {
            self.running_count.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// A script that has run for more than `threshold_ms` at `now_ms`, if any: its shard
    /// and whether it is a function (for the text of `-BUSY`).
    pub fn busy(&self, now_ms: u64, threshold_ms: u64) -> Option<(usize, bool)> {
        if self.running_count.load(Ordering::Acquire) == 0 || threshold_ms == 0 {
            return None;
        }
        self.running.lock().iter().find(|(_, r)| now_ms.saturating_sub(r.info.started_ms) >= threshold_ms).map(|(s, r)| (*s, r.info.function))
    }

    /// The running scripts' descriptions.
    pub fn running(&self) -> Vec<Running> {
        self.running.lock().values().map(|r| r.info.clone()).collect()
    }

    /// SCRIPT KILL (`function` false) or FUNCTION KILL: Redis's reply.
    pub fn kill(&self, function: bool) -> Result<(), String> {
        let running = self.running.lock();
        if running.is_empty() {
            return Err("NOTBUSY No scripts in execution right now.".into());
        }
        let mine: Vec<&RunningScript> = running.values().filter(|r| r.info.function == function).collect();
        if mine.is_empty() {
            return Err(if function {
                "NOTBUSY No scripts in execution right now.".into()
            } else {
                "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.".into()
            });
        }
        if mine.iter().any(|r| r.wrote.load(Ordering::Relaxed)) {
            return Err("UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.".into());
        }
        for r in mine {
            r.kill.store(true, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Records shard `shard`'s Lua heap size.
    pub fn note_lua_memory(&self, shard: usize, bytes: u64) {
        self.lua_heaps.lock().insert(shard, bytes);
    }

    /// Bytes of every shard's Lua heap (INFO `used_memory_lua`).
    pub fn lua_memory(&self) -> u64 {
        self.lua_heaps.lock().values().sum()
    }

    pub fn new_library_id(&self) -> u64 {
        self.next_library_id.fetch_add(1, Ordering::Relaxed)
    }

    /// `redisLrand48() % REDIS_LRAND48_MAX / REDIS_LRAND48_MAX`: math.random's draw.
    pub fn random(&self) -> f64 {
        let mut x = self.rand48.load(Ordering::Relaxed);
        x = (0x5_DEEC_E66D_u64.wrapping_mul(x).wrapping_add(0xB)) & ((1 << 48) - 1);
        self.rand48.store(x, Ordering::Relaxed);
        let r = (x >> 17) % LRAND48_MAX;
        r as f64 / LRAND48_MAX as f64
    }

    /// `redisSrand48(seed)`.
    pub fn randomseed(&self, seed: i32) {
        self.rand48.store(((seed as u32 as u64) << 16) | 0x330E, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_follows_redis_sequence() {
        // The first three `math.random()` of a fresh redis-server 7.0.
        let s = Shared::default();
        let got: Vec<String> = (0..3).map(|_| format!("{:.14}", s.random())).collect();
        assert_eq!(got, ["0.39646477363839", "0.84048536971234", "0.35333609737146"]);
    }

    #[test]
    fn sha1_of_scripts() {
        assert_eq!(sha1_hex(b"return 1"), "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
        assert_eq!(sha1_hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    }
}
