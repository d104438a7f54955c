//! The Redis keys of a lock: rlock's layout under `--prefix`, or Redisson's
//! (`--redisson`), every key of one lock under one Cluster hash tag `{NAME}`
//! so that each script touches a single slot.

use crate::lock::name::LockId;
use crate::lock::token::{Digest, Token};

/// The Redis keys of one lock. A field and the key the lock scripts call
/// `K_<FIELD>` (`src/backend/lua/prelude/1-layout.lua`) are one key, at the
/// place [`Keys::script_keys`] gives it; `K_MINE` is the caller's own
/// wake-up list ([`Keys::wake_list`]). A unit test holds both sides to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    /// The lock name as the user gave it.
    pub name: String,
    /// `K_BASE`, `PREFIX:{NAME}`: what every other key's name starts with.
    /// Never written: a key there is an earlier rlock's or another program's.
    pub base: String,
    /// `K_HOLDS`, the key that exists while the lock is held. rlock's layout:
    /// a hash owner digest → `count|lease end|kind|holder JSON`, at
    /// `PREFIX:{NAME}:leases`, where rlock before this layout kept a sorted
    /// set, so that each version stops at the other's holds (see
    /// `src/backend/lua/prelude/4-holds.lua`). `--redisson`: Redisson's hash
    /// at NAME, owner field → hold count.
    pub holds: String,
    /// `K_FENCE`, the fencing counter, raised on every new hold; expires 30
    /// days after the last fence handed out.
    pub fence: String,
    /// `K_WAITERS`, sorted set waiter digest → arrival (server µs) of every
    /// waiter.
    pub waiters: String,
    /// `K_XWAIT`, sorted set waiter digest → arrival of exclusive and
    /// semaphore waiters.
    pub xwait: String,
    /// `K_WEXP`, sorted set waiter digest → registration expiry (server ms).
    pub wexp: String,
    /// `K_WKIND`, hash waiter digest → the kind of hold it waits for.
    pub wkind: String,
    /// `K_HISTORY`, stream of the lock's last events (`rlock history`),
    /// capped; expires 30 days after its last release (or its creation).
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
            holds: format!("{base}:leases"),
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
        keys.holds = name.to_owned();
        keys.fence = format!("{{{name}}}:rlock-fence");
        keys.history = format!("{{{name}}}:rlock-history");
        keys.redisson = Some(keys.unlock_channel());
        keys
    }

    /// A waiter's own list (rlock's own layout): releases push a wake-up to
    /// it, signals an interrupt. Named by the token's digest, as everything
    /// Redis keeps is.
    pub fn wake_list(&self, token: &Token) -> String {
        self.wake_list_of(&token.digest())
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
    pub fn wake_list_of(&self, digest: &Digest) -> String {
        format!("{}:w:{}", self.base, digest.as_str())
    }

    /// Every key a script gets, in the order of `src/backend/lua/prelude/1-layout.lua`:
    /// `token`'s wake-up list seventh, the history stream eighth (given to every
    /// script, written only when the caller passes a history cap), `base`
    /// ninth (never written: a key there is an earlier rlock's or another
    /// program's), then the lists of the waiters whose digests are `others`
    /// (those the script may write to).
    pub fn script_keys(&self, token: &Token, others: &[Digest]) -> Vec<String> {
        let mut keys = Vec::with_capacity(9 + others.len());
        keys.extend([
            self.holds.clone(),
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

    /// The keys every lock script gets, in `KEYS` order, as both sides name them.
    const SCRIPT_KEYS: [&str; 9] = [
        "holds", "fence", "waiters", "xwait", "wexp", "wkind", "mine", "history", "base",
    ];

    /// The prelude's `local K_A, K_B = KEYS[1], KEYS[2]` lines: (n, "K_A").
    fn prelude_names(layout: &str) -> Vec<(usize, String)> {
        let mut names = Vec::new();
        for line in layout.lines().filter_map(|l| l.strip_prefix("local K_")) {
            let (left, right) = line.split_once(" = ").expect("local K_... = KEYS[...]");
            let left = format!("K_{left}");
            for (name, key) in left.split(", ").zip(right.split(", ")) {
                let n = key.strip_prefix("KEYS[").and_then(|k| k.strip_suffix(']'));
                names.push((n.unwrap().parse().unwrap(), name.to_owned()));
            }
        }
        names
    }

    #[test]
    fn each_key_has_one_name_in_rust_and_in_the_scripts() {
        let layout = include_str!("../lua/prelude/1-layout.lua");
        let mut names = prelude_names(layout);
        names.sort();
        let keys = Keys::new("rlock", "deploy");
        let token = Token::parse(&"0".repeat(32)).unwrap();
        let given = keys.script_keys(&token, &[]);
        assert_eq!(given.len(), SCRIPT_KEYS.len());
        assert_eq!(names.len(), SCRIPT_KEYS.len(), "{names:?}");
        for (i, name) in SCRIPT_KEYS.iter().enumerate() {
            let n = i + 1;
            assert_eq!(names[i], (n, format!("K_{}", name.to_uppercase())));
            let header = format!("-- KEYS[{n}] {name} ");
            assert!(layout.lines().any(|l| l.starts_with(&header)), "{header}");
            let field = match *name {
                "holds" => &keys.holds,
                "fence" => &keys.fence,
                "waiters" => &keys.waiters,
                "xwait" => &keys.xwait,
                "wexp" => &keys.wexp,
                "wkind" => &keys.wkind,
                "mine" => &keys.wake_list(&token),
                "history" => &keys.history,
                "base" => &keys.base,
                other => panic!("no key {other}"),
            };
            assert_eq!(&given[i], field, "KEYS[{n}]");
        }
    }

    #[test]
    fn every_key_shares_one_hash_tag() {
        let keys = Keys::new("rlock", "deploy");
        assert_eq!(keys.holds, "rlock:{deploy}:leases");
        let token = Token::parse(&"0".repeat(32)).unwrap();
        for key in keys.script_keys(&token, &[Digest::named("ab".into())]) {
            assert!(key.starts_with("rlock:{deploy}"), "{key}");
        }
        assert_eq!(Keys::new("", "x").holds, "{x}:leases");
    }

    #[test]
    fn history_stands_eighth_the_bare_key_ninth_and_other_lists_after_them() {
        let keys = Keys::new("rlock", "deploy");
        let token = Token::parse(&"0".repeat(32)).unwrap();
        let given = keys.script_keys(&token, &[Digest::named("ab".into())]);
        assert_eq!(given.len(), 10);
        assert_eq!(given[7], "rlock:{deploy}:history");
        assert_eq!(given[8], "rlock:{deploy}");
        assert_eq!(given[9], "rlock:{deploy}:w:ab");
    }
}
