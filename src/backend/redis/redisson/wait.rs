//! `--redisson` waiting: Redisson keeps no waiter state in Redis and
//! publishes on its unlock channel instead, so a waiter subscribes to that
//! channel (and to its own interrupt channel) before an attempt, and waits
//! for a message there.

use std::time::Duration;

use redis::{Connection, Value};

use super::super::call::interrupted;
use super::super::keys::Keys;
use super::super::reply::as_string;
use super::super::topology::{Source, node_client};
use super::RedissonSession;
use crate::backend::Wake;
use crate::error::Result;
use crate::lock::name::LockId;
use crate::lock::token::Token;

impl RedissonSession {
    /// Subscribes to `lock`'s Redisson unlock channel and the interrupt channel,
    /// unless already subscribed to them.
    pub(super) fn subscribe(&mut self, lock: &LockId, channel: &str, token: &Token) -> Result<()> {
        if self
            .inner
            .sub
            .as_ref()
            .is_some_and(|(name, _)| *name == lock.name)
        {
            return Ok(());
        }
        self.inner.sub = None;
        let limit = self.inner.timeout();
        let opened = self.open_subscription(lock, channel, token, limit);
        match opened {
            Ok(con) => {
                self.inner.sub = Some((lock.name.clone(), con));
                Ok(())
            }
            Err(err) => Err(self.inner.unavailable_for(lock, &err, limit)),
        }
    }

    /// A connection subscribed to Redisson's unlock channel and this waiter's
    /// interrupt channel. On a Cluster also with SSUBSCRIBE to the unlock
    /// channel, at the node that serves its slot (MOVED says which): Redisson
    /// on a Redis 7 Cluster publishes its unlocks with SPUBLISH.
    fn open_subscription(
        &self,
        lock: &LockId,
        channel: &str,
        token: &Token,
        limit: Duration,
    ) -> redis::RedisResult<Connection> {
        let mut node = self.inner.node.clone();
        let mut moved = None;
        for _ in 0..3 {
            let client = match (&*self.inner.source, &node) {
                (Source::Cluster(spec), Some(addr)) => node_client(spec, addr)?,
                (source, _) => source.client(limit)?,
            };
            let mut con = client.get_connection_with_timeout(limit)?;
            con.set_read_timeout(Some(limit))?;
            con.set_write_timeout(Some(limit))?;
            let cmd = redis::cmd("SUBSCRIBE")
                .arg(channel)
                .arg(Keys::of(lock).interrupt_channel(token))
                .get_packed_command();
            con.send_packed_command(&cmd)?;
            // One confirmation per channel, or one error (an ACL refusal)
            // for the whole command.
            con.recv_response()?.extract_error()?;
            con.recv_response()?.extract_error()?;
            if !matches!(*self.inner.source, Source::Cluster(_)) {
                return Ok(con);
            }
            con.send_packed_command(&redis::cmd("SSUBSCRIBE").arg(channel).get_packed_command())?;
            match con.recv_response()?.extract_error() {
                Ok(_) => return Ok(con),
                Err(err) => match err.redirect_node() {
                    Some((addr, _)) => {
                        node = Some(addr.to_owned());
                        moved = Some(err);
                    }
                    // Before Redis 7 there is no sharded pub/sub, and no
                    // Redisson that uses it.
                    None if err
                        .detail()
                        .unwrap_or_default()
                        .to_ascii_lowercase()
                        .contains("unknown command") =>
                    {
                        return Ok(con);
                    }
                    None => return Err(err),
                },
            }
        }
        Err(moved.unwrap_or_else(|| redis::RedisError::from((redis::ErrorKind::Io, "no node"))))
    }

    /// `--redisson`: waits for a message on the subscribed channels.
    pub(super) fn wait_on_channels(
        &mut self,
        lock: &LockId,
        token: &Token,
        timeout: Duration,
    ) -> Result<Wake> {
        let con = match self.inner.sub.as_mut() {
            Some((name, con)) if *name == lock.name => con,
            // Subscribed to another lock of a several-NAME run (or not at all):
            // subscribe to this one and look again before waiting, so no unlock
            // between the attempt and the subscription is missed.
            _ => {
                let channel = Keys::of(lock).unlock_channel();
                self.subscribe(lock, &channel, token)?;
                return Ok(Wake::TimedOut);
            }
        };
        let read = con
            .set_read_timeout(Some(timeout.max(Duration::from_millis(1))))
            .and_then(|()| con.recv_response());
        match read {
            Ok(Value::Array(items)) => {
                let interrupt = Keys::of(lock).interrupt_channel(token);
                let on = items.get(1).and_then(as_string).unwrap_or_default();
                Ok(if on == interrupt {
                    Wake::Interrupted
                } else {
                    Wake::Released
                })
            }
            Ok(_) => Ok(Wake::Released),
            Err(err) => {
                // After a timed-out read redis-rs would skip the next message as a
                // late reply: subscribe afresh before the next attempt instead.
                self.inner.sub = None;
                if err.is_timeout() || interrupted(&err) {
                    Ok(Wake::TimedOut)
                } else {
                    Err(self
                        .inner
                        .unavailable(&err, self.inner.timeout())
                        .in_lock(&lock.name))
                }
            }
        }
    }
}
