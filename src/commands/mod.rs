//! What each subcommand does, on top of the layers below: `run`, the
//! scripting trio `acquire`/`renew`/`release` (`scripting`) and the
//! `--while-pid` keeper, `status`/`list`, `check`, `history`, `metrics` (with
//! its Prometheus text encoder), and where their output goes (`output`).

pub(crate) mod check;
pub(crate) mod history;
pub(crate) mod metrics;
mod output;
mod prometheus;
pub(crate) mod run;
pub(crate) mod scripting;
pub(crate) mod status;
pub(crate) mod while_pid;
