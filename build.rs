//! Computes the SHA1 of each Lua script at build time (`src/backend/script.rs`), so
//! that no run spends its start-up hashing ~47 KB of script text: a lock
//! script is invoked by its SHA1 (EVALSHA) and loaded only when the server
//! does not know it (NOSCRIPT).
//!
//! The prelude is `src/backend/lua/prelude/*.lua`, joined in name order.
//! `OUT_DIR/lua_sha.rs` defines `prelude!()`, that text (as `concat!` of
//! `include_str!`s), and for every `src/backend/lua/NAME.lua`
//! `lua_sha!("lua/NAME.lua", plain)`, the SHA1 of the file, and
//! `lua_sha!("lua/NAME.lua", prelude)`, that of the prelude followed by it.
//! A unit test in `src/backend/script.rs` checks each against its text.

use std::fmt::Write as _;
use std::{env, fs, path::Path};

/// The `.lua` files of `dir`, in name order.
fn lua_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            entry
                .expect("a directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.ends_with(".lua"))
        .collect();
    names.sort();
    names
}

fn main() {
    let root = env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR");
    let lua = Path::new(&root).join("src/backend/lua");
    let prelude_dir = lua.join("prelude");
    println!("cargo:rerun-if-changed=src/backend/lua");
    println!("cargo:rerun-if-changed=src/backend/lua/prelude");
    let mut prelude = Vec::new();
    let mut out = String::from("macro_rules! prelude {\n    () => {\n        concat!(");
    for name in lua_files(&prelude_dir) {
        let path = prelude_dir.join(&name);
        println!("cargo:rerun-if-changed={}", path.display());
        prelude.extend(fs::read(&path).expect("a prelude file"));
        write!(out, "include_str!({:?}), ", path.display().to_string()).unwrap();
    }
    out.push_str(")\n    };\n}\n\nmacro_rules! lua_sha {\n");
    for name in lua_files(&lua) {
        let path = lua.join(&name);
        println!("cargo:rerun-if-changed={}", path.display());
        let text = fs::read(&path).expect("a Lua script");
        let plain = sha1_smol::Sha1::from(&text).digest().to_string();
        let mut joined = sha1_smol::Sha1::from(&prelude);
        joined.update(&text);
        let joined = joined.digest().to_string();
        writeln!(out, "    (\"lua/{name}\", plain) => {{ \"{plain}\" }};").unwrap();
        writeln!(out, "    (\"lua/{name}\", prelude) => {{ \"{joined}\" }};").unwrap();
    }
    out.push_str("}\n");
    let dest = Path::new(&env::var("OUT_DIR").expect("OUT_DIR")).join("lua_sha.rs");
    fs::write(dest, out).expect("OUT_DIR/lua_sha.rs");
}
