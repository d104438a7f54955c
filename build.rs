//! Computes the SHA1 of each Lua script at build time (`src/backend/script.rs`), so
//! that no run spends its start-up hashing ~47 KB of script text: a lock
//! script is invoked by its SHA1 (EVALSHA) and loaded only when the server
//! does not know it (NOSCRIPT).
//!
//! For every `src/backend/lua/NAME.lua` but `common.lua`, `OUT_DIR/lua_sha.rs`
//! defines `lua_sha!("lua/NAME.lua", plain)`, the SHA1 of the file, and
//! `lua_sha!("lua/NAME.lua", common)`, that of `common.lua` followed by it.
//! A unit test in `src/backend/script.rs` checks each against its text.

use std::fmt::Write as _;
use std::{env, fs, path::Path};

fn main() {
    let lua = Path::new("src/backend/lua");
    println!("cargo:rerun-if-changed=src/backend/lua");
    let common = fs::read(lua.join("common.lua")).expect("src/backend/lua/common.lua");
    let mut names: Vec<String> = fs::read_dir(lua)
        .expect("src/lua")
        .map(|entry| {
            entry
                .expect("src/lua entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.ends_with(".lua") && name != "common.lua")
        .collect();
    names.sort();
    let mut out = String::from("macro_rules! lua_sha {\n");
    for name in names {
        let path = lua.join(&name);
        println!("cargo:rerun-if-changed={}", path.display());
        let text = fs::read(&path).expect("a Lua script");
        let plain = sha1_smol::Sha1::from(&text).digest().to_string();
        let mut joined = sha1_smol::Sha1::from(&common);
        joined.update(&text);
        let joined = joined.digest().to_string();
        writeln!(out, "    (\"lua/{name}\", plain) => {{ \"{plain}\" }};").unwrap();
        writeln!(out, "    (\"lua/{name}\", common) => {{ \"{joined}\" }};").unwrap();
    }
    out.push_str("}\n");
    let dest = Path::new(&env::var("OUT_DIR").expect("OUT_DIR")).join("lua_sha.rs");
    fs::write(dest, out).expect("OUT_DIR/lua_sha.rs");
}
