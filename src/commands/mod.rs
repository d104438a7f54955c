//! What each subcommand does, on top of the layers below: `run`, `acquire`
//! and its `--while-pid` keeper, `renew`/`release` (`scripting`),
//! `status`/`list`, `check`, `history`, `metrics` (with its Prometheus text
//! encoder), and where their output goes (`output`).

pub(crate) mod acquire;
pub(crate) mod check;
pub(crate) mod history;
pub(crate) mod metrics;
mod output;
mod prometheus;
pub(crate) mod run;
pub(crate) mod scripting;
pub(crate) mod status;
pub(crate) mod while_pid;
