//! One server per data directory: an advisory lock on `dir/abacus.lock`.
//!
//! Why: two servers started on one directory (an operator's typo, a restart script that
//! races the old process) would both append to the same log segment, and a restart would
//! load the union of both: silent corruption that every checker calls valid. The first server
//! takes an exclusive `flock` on the lock file and holds it for the life of the process; a
//! second one fails to take it and refuses to start, naming the directory and the holder.
//!
//! Why `flock` and not "the file exists": the kernel drops the lock when the holder's last
//! descriptor closes, so a process killed with `kill -9` (or a machine that lost power) never
//! leaves a stale lock behind that an operator must remove by hand. The file itself stays;
//! its content (the holder's pid, for messages) is only advice.
//!
//! The checkers (`abacus check-aof`, `check-snapshot`) take the same lock for what they
//! change (`--fix`) and only look at it for what they read (a read of a live server's files
//! is allowed, with a note that they may be changing underneath).

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The lock file's name inside the data directory.
pub const LOCK_FILE: &str = "abacus.lock";

/// The held lock: dropping it (or the process ending) releases it.
#[derive(Debug)]
pub struct DirLock {
    file: File,
    path: PathBuf,
}

impl DirLock {
    /// Takes the lock on `dir` for `who` (what the holder is, for the messages of those who
    /// find it taken), or says who holds it.
    pub fn acquire(dir: &Path, who: &str) -> crate::Result<DirLock> {
        let path = dir.join(LOCK_FILE);
        let shown = absolute(dir);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| format!("cannot open the lock file {}: {e}", path.display()))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let holder = read_holder(&mut file);
                return Err(format!(
                    "the data directory {} is in use by another process ({holder}); one server per data directory \
                     (its log and snapshots would be written by both)",
                    shown.display()
                ));
            }
            Err(TryLockError::Error(e)) => return Err(format!("cannot lock {}: {e}", path.display())),
        }
        // The holder's identity, for the message a second process prints. Written after the
        // lock is ours, so it never overwrites a live holder's line.
        let line = format!("pid {}, {who}\n", std::process::id());
        file.set_len(0)
            .and_then(|_| file.seek(SeekFrom::Start(0)))
            .and_then(|_| file.write_all(line.as_bytes()))
            .map_err(|e| format!("cannot write the lock file {}: {e}", path.display()))?;
        Ok(DirLock { file, path })
    }

    /// Who holds `dir`'s lock right now, if anyone: for tools that only read.
    pub fn holder(dir: &Path) -> Option<String> {
        let mut file = OpenOptions::new().read(true).write(true).open(dir.join(LOCK_FILE)).ok()?;
        match file.try_lock() {
            Ok(()) => {
                let _ = file.unlock();
                None
            }
            Err(TryLockError::WouldBlock) => Some(read_holder(&mut file)),
            Err(TryLockError::Error(_)) => None,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        // Closing the descriptor releases the lock anyway; unlocking first keeps the release
        // independent of other descriptors of the same file a caller might have opened.
        let _ = self.file.unlock();
    }
}

fn read_holder(file: &mut File) -> String {
    let mut text = String::new();
    let _ = file.seek(SeekFrom::Start(0)).and_then(|_| file.read_to_string(&mut text));
    let text = text.trim();
    if text.is_empty() {
        "holder unknown".to_string()
    } else {
        text.chars().take(200).collect()
    }
}

/// `dir` as an absolute path, for messages (the directory exists: the lock file is in it).
pub fn absolute(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir).unwrap_or_else(|_| std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tempdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("abacus-dirlock-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn second_lock_is_refused_with_the_holder_and_released_on_drop() {
        let d = tempdir("second");
        let first = DirLock::acquire(&d, "abacus serve").unwrap();
        let err = DirLock::acquire(&d, "abacus serve").unwrap_err();
        assert!(err.contains(&format!("pid {}", std::process::id())), "{err}");
        assert!(err.contains(&absolute(&d).display().to_string()), "{err}");
        assert!(DirLock::holder(&d).is_some_and(|h| h.contains("abacus serve")));
        drop(first);
        assert_eq!(DirLock::holder(&d), None);
        let again = DirLock::acquire(&d, "abacus check-aof --fix").unwrap();
        assert!(again.path().ends_with(LOCK_FILE));
        drop(again);
        let _ = std::fs::remove_dir_all(&d);
    }
}
