//! Redlock topology: independent servers, and rlock given one `--url` each.

use std::ffi::OsStr;
use std::process::Command;

use super::redis_server::RedisServer;
use super::rlock::bare;

/// `n` independent servers.
pub fn servers(n: usize) -> Vec<RedisServer> {
    servers_with(n, &[])
}

/// `n` independent servers, each started with `extra` arguments.
pub fn servers_with(n: usize, extra: &[&str]) -> Vec<RedisServer> {
    (0..n).map(|_| RedisServer::start_with(extra)).collect()
}

/// `rlock --url A --url B …`: one lock over the servers at `urls`.
pub fn rlock<S: AsRef<OsStr>>(urls: impl IntoIterator<Item = S>) -> Command {
    let mut cmd = bare();
    for url in urls {
        cmd.arg("--url").arg(url);
    }
    cmd
}

/// [`rlock`] over `servers`' plain URLs.
pub fn over(servers: &[&RedisServer]) -> Command {
    rlock(servers.iter().map(|s| s.url()))
}
