//! Server-side scripts as Redis 7.0 runs them: EVAL's scripts and FUNCTION's libraries in
//! a sandboxed Lua 5.1 (`vm.rs`), the conversions between replies and Lua values
//! (`convert.rs`), the Lua libraries Redis adds (`libs/`), and what all shards' Lua states
//! share: the script cache, the libraries, the random generator (`shared.rs`).
//!
//! Why Lua 5.1 through `mlua` (vendored): it is the version Redis embeds, so scripts written
//! for Redis (their `unpack`, `setfenv`, `table.getn`, number semantics) run unchanged; mlua
//! is the maintained binding that builds it from source, with memory limits, hooks (for
//! SCRIPT KILL) and scoped callbacks (a command call reaches the server for one run only).
//!
//! This crate does no I/O and knows no shard: a running script calls commands through a
//! [`Host`] that the server implements.

pub mod convert;
pub mod libs;
pub mod shared;
pub mod vm;

pub use shared::{sha1_hex, FunctionMeta, Libraries, Library, Running, Shared};
pub use vm::{install_libraries, parse_library_header, script_flags, valid_name, Host, Invocation, Vm, SCRIPT_FLAGS};
