//! The repository stands alone: no file of it reads a path outside it.
//!
//! A clone of the project with nothing beside it must build and pass its tests, so no test,
//! script, benchmark or source file may name a file outside the repository: not the team's
//! `shared` folder beside it, not a machine's absolute path (`/work/...`, `/home/...`, `/root/...`),
//! not a climb out of the repository from a crate (`CARGO_MANIFEST_DIR` joined with more `..`
//! than the crate is deep). A peer that cannot ship with the repository (a licensed Redis
//! module) is named by an environment variable, and its tests skip with a hint when unset.
//!
//! The check is textual, over every file that code reads or runs (sources, scripts,
//! manifests, test data), skipping prose (`*.md`, where a past command may quote a path) and
//! what the build and the tests make (`target/`, the virtual environments, data folders).

use std::path::{Path, PathBuf};

/// Extensions of the files that are read or run.
const CODE: &[&str] = &["rs", "py", "sh", "toml", "txt", "cfg", "ini", "json", "yml", "yaml", "conf", "lua", "sql"];

/// Folders made by the build, the tests or the user, not part of the repository.
const SKIP_DIRS: &[&str] = &[".git", "target", ".venv-tests", ".venv-python-hll", "abacus-data", "__pycache__", ".pytest_cache", "devbench", "node_modules"];

/// Text that names a place outside the repository (spelt in pieces, so that this file does
/// not name them itself).
const OUTSIDE: &[&str] = &[concat!("..", "/shared"), concat!("/wo", "rk/"), concat!("/ho", "me/"), concat!("/ro", "ot/"), concat!("../", "../../")];

fn root() -> PathBuf {
    // crates/abacus -> the repository's root.
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repository root")
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        let Ok(kind) = e.file_type() else { continue };
        if kind.is_dir() {
            if !SKIP_DIRS.contains(&name.as_str()) {
                walk(&path, out);
            }
        } else if kind.is_file() {
            let ext = path.extension().and_then(|x| x.to_str()).unwrap_or("");
            // Extension-less scripts (`.ci/run`) are code too.
            if CODE.contains(&ext) || (ext.is_empty() && !name.starts_with('.')) {
                out.push(path);
            }
        }
    }
}

/// The lines of `text` that name a place outside the repository.
fn outside_refs(text: &str) -> Vec<(usize, String)> {
    let mut hits = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if OUTSIDE.iter().any(|p| line.contains(p)) && !line.contains("stands_alone: allowed") {
            hits.push((i + 1, line.trim().to_owned()));
        }
    }
    hits
}

#[test]
fn no_file_reads_a_path_outside_the_repository() {
    let root = root();
    let mut files = Vec::new();
    walk(&root, &mut files);
    assert!(files.len() > 50, "walked only {} files under {}", files.len(), root.display());
    let this = Path::new(file!()).file_name().unwrap();
    let mut found = Vec::new();
    for f in files {
        if f.file_name() == Some(this) {
            continue; // its own list of patterns
        }
        let Ok(text) = std::fs::read_to_string(&f) else { continue }; // binary data
        for (line, s) in outside_refs(&text) {
            found.push(format!("{}:{line}: {s}", f.strip_prefix(&root).unwrap_or(&f).display()));
        }
    }
    assert!(found.is_empty(), "files naming a path outside the repository (ship what they read inside it, or take the path from an environment variable):\n{}", found.join("\n"));
}

#[test]
fn the_patterns_catch_what_broke_a_fresh_clone() {
    // The two references issue 47 found on a fresh clone.
    let vectors = format!("let dir = PathBuf::from(env!(\"CARGO_MANIFEST_DIR\")).join(\"{}/hll/vectors\");", concat!("../../..", "/shared"));
    let module = format!("MODULE = os.environ.get(\"REDISTIMESERIES_SO\", \"{}/{}/peers/x.so\")", concat!("/wo", "rk"), concat!("sha", "red"));
    assert_eq!(outside_refs(&vectors).len(), 1);
    assert_eq!(outside_refs(&module).len(), 1);
    assert!(outside_refs("let dir = root.join(\"tests/vectors\");\n// ../src is fine").is_empty());
}
