//! What keeps a hold once it is taken, for `rlock run` and a library
//! program alike: the locks and their fences ([`held`]), who holds them
//! ([`holder`]), the watchdog that renews the lease ([`watchdog`]) against
//! its deadlines ([`deadline`]), why a hold was lost ([`lost`]), how it
//! ended ([`ending`]), and the history it leaves ([`record`]).

mod clocks;
pub(crate) mod deadline;
pub(crate) mod ending;
pub(crate) mod held;
pub(crate) mod holder;
pub(crate) mod lost;
pub(crate) mod record;
pub(crate) mod retries;
pub(crate) mod watchdog;

use std::time::Duration;

pub use ending::Ending;
pub use record::Recorder;

/// After a loss, the release and the history write share this much time, so
/// that rlock exits within `--kill-after` + 3 s of SIGTERM even when the
/// server does not answer.
pub const AFTER_LOSS: Duration = Duration::from_millis(2500);

/// After a loss, the bound on each connection attempt and reply.
pub const AFTER_LOSS_STEP: Duration = Duration::from_millis(500);
