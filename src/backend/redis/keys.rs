//! The Redis keys of a lock: rlock's layout under `--prefix`, or Redisson's
//! (`--redisson`), every key of one lock under one Cluster hash tag `{NAME}`
//! so that each script touches a single slot.

use crate::lock::name::LockId;
use crate::lock::token::Token;

/// The Redis keys of one lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    /// The lock name as the user gave it.
    pub name: String,
    /// What every other key's name starts with: `PREFIX:{NAME}`.
    pub base: String,
    /// The key that exists while the lock is held. rlock's layout: the holds,
    /// a hash owner digest → `count|lease end|kind|holder JSON`, at
    /// `PREFIX:{NAME}:leases`, where rlock before this layout kept a sorted
    /// set, so that each version stops at the other's holds (see
    /// `src/backend/lua/prelude/4-holds.lua`). `--redisson`: Redisson's hash at NAME.
    pub lock: String,
    /// Fencing counter, raised on every new hold; expires 30 days after the
    /// last fence handed out.
    pub fence: String,
    /// Sorted set waiter-token → arrival (server µs) of every waiter.
    pub waiters: String,
    /// Sorted set waiter-token → arrival of exclusive and semaphore waiters.
    pub xwait: String,
    /// Sorted set waiter-token → registration expiry (server ms).
    pub wexp: String,
    /// Hash waiter-token → the kind of hold it waits for.
    pub wkind: String,
    /// Stream of the lock's last events (`rlock history`), capped; expires
    /// 30 days after its last release (or its creation).
    pub history: String,
    /// `--redisson`: the lock is Redisson's hash at key NAME, waiters are woken
    /// through Redisson's unlock channel (this field names it).
    pub redisson: Option<String>,
}

impl Keys {
    /// The keys of `id`: rlock's own layout, or Redisson's.
    pub fn of(id: &LockId) -> Self {
        if id.redisson {
            Keys::redisson(&id.name)
        } else {
            Keys::new(&id.prefix, &id.name)
        }
    }

    /// Keys for `name` under `prefix` (`rlock` by default): `rlock:{name}`, `rlock:{name}:…`.
    pub fn new(prefix: &str, name: &str) -> Self {
        let base = if prefix.is_empty() {
            format!("{{{name}}}")
        } else {
            format!("{prefix}:{{{name}}}")
        };
        Keys {
            name: name.to_owned(),
            lock: format!("{base}:leases"),
            fence: format!("{base}:fence"),
            waiters: format!("{base}:waiters"),
            xwait: format!("{base}:xwait"),
            wexp: format!("{base}:wexp"),
            wkind: format!("{base}:wkind"),
            history: format!("{base}:history"),
            base,
            redisson: None,
        }
    }

    /// Keys of a lock stored as Redisson's `getLock(NAME)` stores it: the hash at
    /// key NAME (no prefix), its unlock channel, and rlock's fence counter under
    /// the hash tag {NAME}, which hashes to NAME's own Cluster slot.
    pub fn redisson(name: &str) -> Self {
        let mut keys = Keys::new("", name);
        keys.lock = name.to_owned();
        keys.fence = format!("{{{name}}}:rlock-fence");
        keys.history = format!("{{{name}}}:rlock-history");
        keys.redisson = Some(keys.unlock_channel());
        keys
    }

    /// A waiter's own list (rlock's own layout): releases push a wake-up to
    /// it, signals an interrupt. Named by the token's digest, as everything
    /// Redis keeps is.
    pub fn wake_list(&self, token: &Token) -> String {
        self.wake_list_of(token.digest().as_str())
    }

    /// `--redisson`: the pub/sub channel a signal interrupts the wait of the
    /// waiter `token` through (named by its digest).
    pub fn interrupt_channel(&self, token: &Token) -> String {
        format!("{{{}}}:rlock-int:{}", self.name, token.digest().as_str())
    }

    /// `--redisson`: Redisson's unlock channel, which releases publish on.
    pub fn unlock_channel(&self) -> String {
        format!("redisson_lock__channel:{{{}}}", self.name)
    }

    /// The wake-up list of the waiter whose token has digest `digest`
    /// (rlock's own layout).
    pub fn wake_list_of(&self, digest: &str) -> String {
        format!("{}:w:{digest}", self.base)
    }

    /// Every key a script gets, in the order of `src/backend/lua/prelude/1-layout.lua`:
    /// `token`'s wake-up list seventh, the history stream eighth (given to every
    /// script, written only when the caller passes a history cap), `base`
    /// ninth (never written: a key there is an earlier rlock's or another
    /// program's), then the lists of the waiters whose digests are `others`
    /// (those the script may write to).
    pub fn script_keys(&self, token: &Token, others: &[String]) -> Vec<String> {
        let mut keys = Vec::with_capacity(9 + others.len());
        keys.extend([
            self.lock.clone(),
            self.fence.clone(),
            self.waiters.clone(),
            self.xwait.clone(),
            self.wexp.clone(),
            self.wkind.clone(),
            self.wake_list(token),
            self.history.clone(),
            self.base.clone(),
        ]);
        keys.extend(others.iter().map(|d| self.wake_list_of(d)));
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_shares_one_hash_tag() {
        let keys = Keys::new("rlock", "deploy");
        assert_eq!(keys.lock, "rlock:{deploy}:leases");
        let token = Token::parse(&"0".repeat(32)).unwrap();
        for key in keys.script_keys(&token, &["ab".into()]) {
            assert!(key.starts_with("rlock:{deploy}"), "{key}");
        }
        assert_eq!(Keys::new("", "x").lock, "{x}:leases");
    }

    #[test]
    fn history_stands_eighth_the_bare_key_ninth_and_other_lists_after_them() {
        let keys = Keys::new("rlock", "deploy");
        let token = Token::parse(&"0".repeat(32)).unwrap();
        let given = keys.script_keys(&token, &["ab".into()]);
        assert_eq!(given.len(), 10);
        assert_eq!(given[7], "rlock:{deploy}:history");
        assert_eq!(given[8], "rlock:{deploy}");
        assert_eq!(given[9], "rlock:{deploy}:w:ab");
    }
}
