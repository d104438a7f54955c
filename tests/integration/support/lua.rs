//! Running rlock's own Lua scripts directly (EVAL, with common.lua in front),
//! for tests of the scripts' semantics step by step.

use super::redis_server::RedisServer;

/// Runs script `file` ("acquire", "release", "renew", "leave", "force") for `token` on lock
/// `name` (prefix rlock) with ARGV `token, args...`.
pub fn script(
    redis: &RedisServer,
    file: &str,
    name: &str,
    token: &str,
    args: &[&str],
) -> redis::Value {
    let common = include_str!("../../../src/lua/common.lua");
    let body = match file {
        "acquire" => include_str!("../../../src/lua/acquire.lua"),
        "release" => include_str!("../../../src/lua/release.lua"),
        "renew" => include_str!("../../../src/lua/renew.lua"),
        "leave" => include_str!("../../../src/lua/leave.lua"),
        "force" => include_str!("../../../src/lua/force.lua"),
        other => panic!("no script {other}"),
    };
    let base = format!("rlock:{{{name}}}");
    let keys = [
        base.clone(),
        format!("{base}:holders"),
        format!("{base}:fence"),
        format!("{base}:leases"),
        format!("{base}:waiters"),
        format!("{base}:xwait"),
        format!("{base}:wexp"),
        format!("{base}:wkind"),
        format!("{base}:w:{token}"),
    ];
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(format!("{common}{body}"))
        .arg(keys.len())
        .arg(&keys[..])
        .arg(token)
        .arg(args);
    cmd.query(&mut redis.con()).unwrap()
}
