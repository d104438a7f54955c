//! Whom an `https://` ping trusts: the CA in `--cacert` (the option that
//! also serves `rediss://`), or else the system's CA store, read as redis
//! reads it for `rediss://` (rustls-native-certs).

use std::path::Path;
use std::sync::{Arc, OnceLock};

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls::{ClientConfig, RootCertStore};

use crate::backend::url::{install_tls_provider, read_tls_file};
use crate::error::{Error, Result};

/// The trust of an `https://` ping.
#[derive(Clone, Debug)]
pub(super) enum Trust {
    /// The system's CA store, read at the first `https://` ping and kept
    /// for the run's other pings and attempts.
    System(Arc<OnceLock<std::result::Result<Arc<ClientConfig>, String>>>),
    /// The certificates of `--cacert`, read when the pinger was made.
    Given(Arc<ClientConfig>),
}

impl Trust {
    /// The certificates of `cacert` (PEM) if given: a file that cannot be
    /// read or holds no certificate is a usage error, found before the run.
    pub(super) fn new(cacert: Option<&Path>) -> Result<Trust> {
        let Some(path) = cacert else {
            return Ok(Trust::System(Arc::default()));
        };
        let pem = read_tls_file("--cacert", path)?;
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let added = cert
                .map_err(|e| e.to_string())
                .and_then(|cert| roots.add(cert).map_err(|e| e.to_string()));
            if let Err(e) = added {
                return Err(Error::usage(format!("--cacert {}: {e}", path.display())));
            }
        }
        if roots.is_empty() {
            return Err(Error::usage(format!(
                "--cacert {}: no PEM certificate in it",
                path.display()
            )));
        }
        Ok(Trust::Given(config(roots)))
    }

    /// The client configuration; the system's store is read at the first
    /// call (on the sending thread: it takes milliseconds).
    pub(super) fn config(&self) -> std::result::Result<Arc<ClientConfig>, String> {
        match self {
            Trust::Given(config) => Ok(config.clone()),
            Trust::System(config) => config.get_or_init(system_store).clone(),
        }
    }
}

/// A configuration trusting the system's CA store.
fn system_store() -> std::result::Result<Arc<ClientConfig>, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let why = found
            .errors
            .first()
            .map_or_else(|| "none found".to_owned(), ToString::to_string);
        return Err(format!(
            "no system CA certificates ({why}): install ca-certificates, or pass --cacert FILE"
        ));
    }
    Ok(config(roots))
}

fn config(roots: RootCertStore) -> Arc<ClientConfig> {
    install_tls_provider();
    Arc::new(
        ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}
