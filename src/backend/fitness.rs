//! What `rlock check` finds about a server: one [`Finding`] per thing rlock's
//! guarantees rest on (scripts run atomically, no eviction of held locks, a
//! restart keeps holds, the user's rights...), each with a [`Verdict`] and a
//! line saying what was seen and what to do about it.

/// How one check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// Fine for rlock's locks.
    Ok,
    /// Could not be checked (the server refused to say): no verdict.
    Unknown,
    /// rlock works, but a guarantee is weaker than the README says.
    Warn,
    /// rlock cannot work with this server.
    Fail,
}

impl Verdict {
    /// The word `check` prints and `--json` carries.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Unknown => "unknown",
            Verdict::Warn => "warn",
            Verdict::Fail => "fail",
        }
    }
}

/// One check on one server.
#[derive(Debug, Clone)]
pub struct Finding {
    /// A short stable name (`eviction`, `persistence`...), for machines.
    pub name: &'static str,
    /// The server it concerns (`host:port`, never a URL).
    pub server: String,
    /// How it came out.
    pub verdict: Verdict,
    /// What was seen and, unless ok, the fix; one line, no secret.
    pub detail: String,
}

impl Finding {
    /// A finding about `server`.
    pub fn new(
        name: &'static str,
        server: &str,
        verdict: Verdict,
        detail: impl Into<String>,
    ) -> Self {
        Finding {
            name,
            server: server.to_owned(),
            verdict,
            detail: detail.into(),
        }
    }
}
