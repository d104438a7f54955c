//! What a lock is, apart from where it lives: its name and keys' identity
//! (`name`), the kind of a hold and its spellings (`kind`), owner and fencing tokens (`token`), lease arithmetic and the
//! clock it is judged by (`clock`), secrets removed from text that is stored
//! with a hold (`redact`), and the events of its history (`event`).

pub(crate) mod clock;
pub(crate) mod event;
pub(crate) mod kind;
pub(crate) mod lease;
pub(crate) mod name;
pub(crate) mod redact;
pub(crate) mod token;
