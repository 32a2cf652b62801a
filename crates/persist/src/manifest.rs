//! The manifest: which files hold the current state.
//!
//! A text file, `abacus.manifest` in the data directory:
//! ```text
//! # Abacus manifest
//! snapshot snap-000003.abs
//! log log-000004.aof
//! log log-000005.aof
//! ```
//! State = the snapshot (if any) plus the logs in order. Log segments change when a snapshot
//! starts (the new segment holds everything after the snapshot's point in time), and a new
//! manifest names the snapshot and the segments after it once the snapshot is durable; only
//! then are older files deleted. The manifest is replaced atomically (temporary file, fsync,
//! rename, fsync of the directory), so a crash at any moment leaves either the old or the new
//! manifest, and the files each one names.

use std::io::Write;
use std::path::Path;

use crate::Result;

pub const FILE_NAME: &str = "abacus.manifest";

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    pub snapshot: Option<String>,
    pub logs: Vec<String>,
}

impl Manifest {
    /// Reads the manifest of `dir`; `None` if there is none (a fresh data directory).
    pub fn read(dir: &Path) -> Result<Option<Manifest>> {
        let path = dir.join(FILE_NAME);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let mut m = Manifest::default();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (kind, name) = line.split_once(' ').ok_or_else(|| format!("{}:{}: expected 'snapshot NAME' or 'log NAME'", path.display(), i + 1))?;
            let name = name.trim();
            if name.is_empty() || name.contains('/') || name.contains("..") {
                return Err(format!("{}:{}: bad file name '{name}'", path.display(), i + 1));
            }
            match kind {
                "snapshot" if m.snapshot.is_none() => m.snapshot = Some(name.to_string()),
                "log" => m.logs.push(name.to_string()),
                _ => return Err(format!("{}:{}: unexpected '{line}'", path.display(), i + 1)),
            }
        }
        Ok(Some(m))
    }

    /// Replaces the manifest of `dir` atomically and durably.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let mut text = String::from("# Abacus manifest: the snapshot and log segments that make up the data.\n");
        if let Some(s) = &self.snapshot {
            text.push_str(&format!("snapshot {s}\n"));
        }
        for l in &self.logs {
            text.push_str(&format!("log {l}\n"));
        }
        let tmp = dir.join(format!("{FILE_NAME}.tmp"));
        let path = dir.join(FILE_NAME);
        let io = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        f.write_all(text.as_bytes()).map_err(io)?;
        f.sync_all().map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(io)?;
        sync_dir(dir)
    }

    /// The files this manifest names.
    pub fn files(&self) -> impl Iterator<Item = &String> {
        self.snapshot.iter().chain(self.logs.iter())
    }
}

/// Makes a directory's entries (renames, new files) durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| format!("cannot fsync directory {}: {e}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_bad_lines() {
        let dir = std::env::temp_dir().join(format!("abacus-manifest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(Manifest::read(&dir).unwrap(), None);
        let m = Manifest { snapshot: Some("snap-000001.abs".into()), logs: vec!["log-000002.aof".into()] };
        m.write(&dir).unwrap();
        assert_eq!(Manifest::read(&dir).unwrap(), Some(m));
        std::fs::write(dir.join(FILE_NAME), "log ../etc/passwd\n").unwrap();
        assert!(Manifest::read(&dir).is_err());
        std::fs::write(dir.join(FILE_NAME), "weird x\n").unwrap();
        assert!(Manifest::read(&dir).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
