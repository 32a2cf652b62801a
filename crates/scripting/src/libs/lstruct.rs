//! TODO
use mlua::{Lua, Result, Table};

pub fn open(lua: &Lua) -> Result<Table> {
    lua.create_table()
}
