//! rlock's integration tests: the real binary against real `redis-server`s.
//!
//! One test binary (one link step). Each module covers one area; put a new test
//! in the module of the behaviour it checks. `support` holds the fixtures: a
//! server, the Sentinel, Cluster, Redlock quorum and TLS topologies, the rlock
//! runner, waiting with deadlines.

// Tests send signals and drive terminals through libc (`unsafe`), and a
// test reads as one story from its setup to its checks: the crate's
// line limit is for src/.
#![allow(unsafe_code, clippy::too_many_lines)]

mod support;

// Locking semantics: exclusion, waiting, renewal, fences, kinds of lock, leases.
/// fences never go back (data lost, counter file removed), 16 digits exact
mod fences;
/// a release hands the lock to the head waiter (scripts, step by step)
mod handoff;
/// shared locks, semaphores, fair queues
mod kinds;
/// the lease's end under pauses, stalls, forced releases and restarts
mod lease;
/// run --max-hold (exit 124, the group killed, the lock free at once)
mod max_hold;
/// server outages ridden out whenever they start; deadlines kept
mod ride_out;
/// exit statuses, exclusion, waiting, renewal, re-entrancy, fencing
mod run;
/// acquire / renew / release, release --force
mod scripting;
/// several NAMEs in one run (all or none)
mod several;

// The Rust library beside the CLI.
/// rlock::Client in this process and the CLI on one server: interop, losses, cost
mod library;

// Backends and topologies: file:, Redlock, replicas, Sentinel, Cluster, TLS, Redisson.
/// three masters; locks in every slot, a slot moved under a holder
mod cluster;
/// the file: backend (this host only, kernel file locks)
mod local;
/// acquire --while-pid / renew / release with file:
mod local_scripts;
/// --redisson interop with Redisson's own lock scripts
mod redisson;
/// one lock over three servers (several --url)
mod redlock;
/// --min-replicas against a primary and a replica
mod replicas;
/// a primary, a replica and three sentinels; a failover
mod sentinel;
/// rediss:// with certificates made by the test
mod tls;

// The Lua scripts themselves: against a model, and the keys they declare.
/// under MONITOR, every key a script touches is one of its KEYS
mod declared_keys;
/// the Lua scripts against an in-memory model, random sequences
mod model;

// Faults: crashes, stalls, outages, signals, injected chaos.
/// contending runs under a loop of injected faults
mod chaos;
/// a SIGKILLed holder's lock released by its guardian; an overdue renewal in status
mod dead_holder;
/// crashes and stalls of rlock or redis-server, lost leases
mod faults;
/// waiting runs wait out a restarting server, within bounds
mod outage;
/// run --signal-grace: a cancelled CI job (GitHub's schedule) releases at once
mod signal_grace;
/// forwarding (kill and terminal), interrupts while waiting
mod signals;
/// a holder's log off a terminal: the closing line, an outage, a skip
mod story;

// The command line and its output: bad input, status, writes that fail, generated files.
/// usage errors and unusable servers, one `rlock:` line each
mod bad_input;
/// completions, man page and --help are up to date; completions tried in bash, zsh and fish
mod generated;
/// output that cannot be written is an error
mod output;
/// status and list
mod status;
/// status, list and -v name the database and prefix they looked in
mod status_scope;
/// the table of every bad input: status, one line, a bound, no write
mod sweep;

// Operations: ACLs, check, history, metrics, pings, secrets, rolling upgrades.
/// ACL users: the documented rules, and what a user lacking one sees
mod acl;
/// `rlock check`: is a server fit for locks (eviction, AOF, rights, quorum)
mod check;
/// check's persistence and user lines: what RDB, AOF and the default user mean
mod check_persistence;
/// rlock history and --history: every event, Redis, Redlock and file:, capped, off
mod history;
/// run --metrics-file and rlock metrics, read by prometheus_client's parser
mod metrics;
/// systemd's notification socket (STATUS, READY, WATCHDOG) and --ready-file
mod notify;
/// --password-command: run for each new connection, failures say why (69)
mod password_command;
/// pings to a monitor (healthchecks.io's protocol) against a recording HTTP(S) server
mod ping;
/// run --ping: what a monitor hears of real runs (start, exit status, skips, losses)
mod run_pings;
/// no password or token stored with a hold; tokens from RLOCK_TOKEN
mod secrets;
/// a rolling upgrade: the previous release's rlock (built from history) beside this one
mod upgrade;
