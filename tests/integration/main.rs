//! rlock's integration tests: the real binary against real `redis-server`s.
//!
//! One test binary (one link step). Each module covers one area; put a new test
//! in the module of the behaviour it checks:
//! - `run`: exit statuses, exclusion, waiting, renewal, re-entrancy, fencing
//! - `fences`: fences never go back (data lost, counter file removed), 16 digits exact
//! - `faults`: crashes and stalls of rlock or redis-server, lost leases
//! - `cluster`: three masters; locks in every slot, a slot moved under a holder
//! - `chaos`: contending runs under a loop of injected faults
//! - `local`: the file: backend (this host only, kernel file locks)
//! - `local_scripts`: acquire --while-pid / renew / release with file:
//! - `model`: the Lua scripts against an in-memory model, random sequences
//! - `signals`: forwarding (kill and terminal), interrupts while waiting
//! - `acl`: ACL users: the documented rules, and what a user lacking one sees
//! - `check`: `rlock check`: is a server fit for locks (eviction, AOF, rights, quorum)
//! - `bad_input`: usage errors and unusable servers, one `rlock:` line each
//! - `sweep`: the table of every bad input: status, one line, a bound, no write
//! - `sentinel`: a primary, a replica and three sentinels; a failover
//! - `several`: several NAMEs in one run (all or none)
//! - `kinds`: shared locks, semaphores, fair queues
//! - `handoff`: a release hands the lock to the head waiter (scripts, step by step)
//! - `history`: rlock history and --history: every event, Redis, Redlock and file:, capped, off
//! - `declared_keys`: under MONITOR, every key a script touches is one of its KEYS
//! - `redlock`: one lock over three servers (several --url)
//! - `redisson`: --redisson interop with Redisson's own lock scripts
//! - `lease`: the lease's end under pauses, stalls, forced releases and restarts
//! - `outage`: waiting runs wait out a restarting server, within bounds
//! - `max_hold`: run --max-hold (exit 124, the group killed, the lock free at once)
//! - `metrics`: run --metrics-file and rlock metrics, read by prometheus_client's parser
//! - `output`: output that cannot be written is an error
//! - `replicas`: --min-replicas against a primary and a replica
//! - `generated`: completions, man page and --help are up to date; completions tried in bash, zsh and fish
//! - `secrets`: no password or token stored with a hold; tokens from RLOCK_TOKEN
//! - `scripting`: acquire / renew / release, release --force
//! - `status`: status and list
//! - `tls`: rediss:// with certificates made by the test
//! - `upgrade`: a rolling upgrade: the previous release's rlock (built from history) beside this one

mod support;

mod acl;
mod bad_input;
mod chaos;
mod check;
mod cluster;
mod declared_keys;
mod faults;
mod fences;
mod generated;
mod handoff;
mod history;
mod kinds;
mod lease;
mod local;
mod local_scripts;
mod max_hold;
mod metrics;
mod model;
mod outage;
mod output;
mod redisson;
mod redlock;
mod replicas;
mod run;
mod scripting;
mod secrets;
mod sentinel;
mod several;
mod signals;
mod status;
mod sweep;
mod tls;
mod upgrade;
