//! The Lua libraries Redis 7.0 loads beside the standard ones: `cjson`, `cmsgpack`, `bit`
//! and `struct`. Redis ships them as C (lua_cjson.c, lua_cmsgpack.c, lua_bit.c,
//! lua_struct.c); here they are written in Rust over mlua, with the same function names,
//! argument checks, formats and error messages, so scripts written for Redis run unchanged.

pub mod bit;
pub mod cjson;
pub mod cmsgpack;
pub mod lstruct;
mod shim;

use mlua::{Lua, Result};

/// Opens the four libraries as globals `cjson`, `cmsgpack`, `bit` and `struct`.
pub fn open_all(lua: &Lua) -> Result<()> {
    let g = lua.globals();
    g.set("cjson", cjson::open(lua)?)?;
    g.set("cmsgpack", cmsgpack::open(lua)?)?;
    g.set("bit", bit::open(lua)?)?;
    g.set("struct", lstruct::open(lua)?)?;
    Ok(())
}
