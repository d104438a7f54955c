//! Builds the backend the global options ask for.

use std::sync::Arc;

use crate::backend::{Backend, Local, Redlock, Standalone};
use crate::cli::Global;
use crate::error::{Error, Result};
use crate::server;

/// The backend for `--url` / `RLOCK_URL` / `REDIS_URL`, with `--prefix` checked:
/// one server, or a Redlock quorum over several.
pub fn backend(global: &Global) -> Result<Arc<dyn Backend>> {
    crate::name::validate_prefix(&global.prefix)?;
    let urls = server::choose_urls(&global.urls, std::env::var("REDIS_URL").ok());
    if let Some(dir) = server::local_dir(&global.urls) {
        if urls.len() > 1 {
            return Err(Error::usage(
                "file: locks this host only; it cannot be combined with other --url",
            ));
        }
        return Ok(Arc::new(Local::new(
            &dir,
            crate::token::inherited_tokens(),
        )?));
    }
    let auth = std::env::var("REDISCLI_AUTH").ok();
    let tls = server::TlsFiles {
        cacert: global.cacert.as_deref(),
        cert: global.cert.as_deref(),
        key: global.key.as_deref(),
    };
    let mut specs = urls
        .iter()
        .map(|url| {
            server::parse_url(url, auth.as_deref(), global.connect_timeout)
                .and_then(|spec| spec.with_tls(&tls))
        })
        .collect::<Result<Vec<_>>>()?;
    if specs.len() == 1 {
        return Ok(Arc::new(Standalone::new(specs.remove(0))?));
    }
    if specs
        .iter()
        .any(|s| s.sentinel.is_some() || s.cluster.is_some())
    {
        return Err(Error::usage(
            "a Redlock quorum (several --url) needs independent redis:// or rediss:// masters, not Sentinel or Cluster URLs",
        ));
    }
    let mut seen: Vec<&str> = specs.iter().map(|s| s.display.as_str()).collect();
    seen.sort();
    if seen.windows(2).any(|w| w[0] == w[1]) {
        return Err(Error::usage(
            "several --url name the same server: a Redlock quorum needs independent servers",
        ));
    }
    Ok(Arc::new(Redlock::new(specs)?))
}
