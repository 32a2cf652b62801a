//! Snapshots (placeholder until the fork-less snapshot lands).

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use abacus_persist::manifest::Manifest;

pub struct Snapshots {
    pub dir: PathBuf,
    pub manifest: Mutex<Manifest>,
}

static SNAPSHOTS: OnceLock<Snapshots> = OnceLock::new();

pub fn init(dir: PathBuf, manifest: Manifest) {
    let _ = SNAPSHOTS.set(Snapshots { dir, manifest: Mutex::new(manifest) });
}
