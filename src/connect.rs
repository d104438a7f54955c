//! Builds the backend the global options ask for.

use std::sync::Arc;

use crate::backend::{Backend, Standalone};
use crate::cli::Global;
use crate::error::{Error, Result};
use crate::server;

/// The backend for `--url` / `RLOCK_URL` / `REDIS_URL`, with `--prefix` checked.
pub fn backend(global: &Global) -> Result<Arc<dyn Backend>> {
    crate::name::validate_prefix(&global.prefix)?;
    let urls = server::choose_urls(&global.urls, std::env::var("REDIS_URL").ok());
    if urls.len() > 1 {
        return Err(Error::usage(
            "several --url (Redlock quorum) are not supported yet",
        ));
    }
    let auth = std::env::var("REDISCLI_AUTH").ok();
    let spec = server::parse_url(&urls[0], auth.as_deref(), global.connect_timeout)?;
    Ok(Arc::new(Standalone::new(spec)?))
}
