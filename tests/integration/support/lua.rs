//! Running rlock's own Lua scripts directly (EVAL, with the prelude in front),
//! for tests of the scripts' semantics step by step.

use super::redis_server::RedisServer;

/// Runs script `file` ("acquire", "release", "renew", "leave", "force") for `token` on lock
/// `name` (prefix rlock) with ARGV `token, args...`, as rlock's client does: the
/// messages the script could not deliver (its outbox: for wake-up lists it was not
/// given) are delivered by wake.lua, which is given them. Returns the script's own reply.
pub fn script(
    redis: &RedisServer,
    file: &str,
    name: &str,
    token: &str,
    args: &[&str],
) -> redis::Value {
    let mut parts = undelivered(redis, file, name, token, args);
    let outbox: Vec<String> = redis::FromRedisValue::from_redis_value(parts[1].clone()).unwrap();
    deliver(redis, name, token, &outbox);
    parts.swap_remove(0)
}

/// Runs wake.lua, as the client does, with `outbox` (digest, message, ...)
/// and the lists it names among the KEYS. The number of messages delivered.
pub fn deliver(redis: &RedisServer, name: &str, token: &str, outbox: &[String]) -> i64 {
    if outbox.is_empty() {
        return 0;
    }
    let lists: Vec<String> = outbox.iter().step_by(2).cloned().collect();
    let wake = include_str!("../../../src/backend/lua/wake.lua");
    redis::FromRedisValue::from_redis_value(eval(redis, wake, name, token, &lists, outbox)).unwrap()
}

/// [`script`] without delivering the outbox (a client that died between its
/// two calls): the whole reply, {reply, outbox, next}.
pub fn undelivered(
    redis: &RedisServer,
    file: &str,
    name: &str,
    token: &str,
    args: &[&str],
) -> Vec<redis::Value> {
    let body = match file {
        "acquire" => include_str!("../../../src/backend/lua/acquire.lua"),
        "release" => include_str!("../../../src/backend/lua/release.lua"),
        "renew" => include_str!("../../../src/backend/lua/renew.lua"),
        "leave" => include_str!("../../../src/backend/lua/leave.lua"),
        "force" => include_str!("../../../src/backend/lua/force.lua"),
        other => panic!("no script {other}"),
    };
    let mut argv = vec![token.to_owned()];
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    let reply = eval(redis, body, name, token, &[], &argv);
    let redis::Value::Array(parts) = reply else {
        panic!("{file}: not a reply of the prelude's done(): {reply:?}")
    };
    assert_eq!(parts.len(), 3, "{file}: {parts:?}");
    parts
}

/// The keys a script of lock `name` gets: the prelude's nine, with `token`'s
/// wake-up list seventh, the history stream eighth and the bare `rlock:{name}`
/// ninth, then the lists of the digests `others`.
pub fn keys(name: &str, token: &str, others: &[String]) -> Vec<String> {
    let base = format!("rlock:{{{name}}}");
    let mut keys = vec![
        format!("{base}:leases"),
        format!("{base}:fence"),
        format!("{base}:waiters"),
        format!("{base}:xwait"),
        format!("{base}:wexp"),
        format!("{base}:wkind"),
        format!("{base}:w:{token}"),
        format!("{base}:history"),
        base.clone(),
    ];
    keys.extend(others.iter().map(|d| format!("{base}:w:{d}")));
    keys
}

/// The prelude rlock puts in front of its lock scripts:
/// `src/backend/lua/prelude/*.lua`, joined in name order.
fn prelude() -> String {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/backend/lua/prelude");
    let mut names: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "lua"))
        .collect();
    names.sort();
    names
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect()
}

fn eval(
    redis: &RedisServer,
    body: &str,
    name: &str,
    token: &str,
    others: &[String],
    argv: &[String],
) -> redis::Value {
    let keys = keys(name, token, others);
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(format!("{}{body}", prelude()))
        .arg(keys.len())
        .arg(&keys[..])
        .arg(argv);
    cmd.query(&mut redis.con()).unwrap()
}
