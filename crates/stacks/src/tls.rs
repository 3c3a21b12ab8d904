//! The lab's certificate and the rustls configurations of servers and clients.
//!
//! Each lab gets its own self-signed certificate (rcgen) for the server's names and addresses.
//! Clients trust exactly that certificate — no "accept anything" verifier — so a measured handshake
//! is a real one. One crypto provider everywhere: ring.

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use base64::Engine;
use std::sync::atomic::{AtomicU64, Ordering};

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use sha2::Digest;

use crate::options::TlsVersion;

pub use quiclab_proto::SERVER_NAME;

/// A lab's certificate, its key and its SPKI hash (what Chromium's
/// `--ignore-certificate-errors-spki-list` takes).
#[derive(Clone)]
pub struct LabCertificate {
    pub cert_der: CertificateDer<'static>,
    pub key_der: Vec<u8>,
    pub cert_pem: String,
    pub key_pem: String,
    pub spki_sha256_base64: String,
}

impl LabCertificate {
    /// A fresh self-signed certificate for `SERVER_NAME`, its sub-domains (a sharded page's
    /// host names, `s1.quiclab.test` …), `localhost` and the given addresses.
    pub fn generate(addresses: &[IpAddr]) -> Result<LabCertificate> {
        let mut names = vec![
            SERVER_NAME.to_string(),
            format!("*.{SERVER_NAME}"),
            "localhost".to_string(),
        ];
        names.extend(addresses.iter().map(|a| a.to_string()));
        let key = rcgen::KeyPair::generate().context("generating the lab key")?;
        let params = rcgen::CertificateParams::new(names).context("certificate names")?;
        let cert = params
            .self_signed(&key)
            .context("self-signing the lab certificate")?;
        let spki = sha2::Sha256::digest(rcgen::PublicKeyData::subject_public_key_info(&key));
        Ok(LabCertificate {
            cert_der: cert.der().clone(),
            key_der: key.serialize_der(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            spki_sha256_base64: base64::engine::general_purpose::STANDARD.encode(spki),
        })
    }

    /// Writes `cert.pem` and `key.pem` into `dir`.
    pub fn save(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir)?;
        // The caller's directory is quiclab's (a claimed `--keep` or a temporary one); never
        // through a symbolic link.
        quiclab_outputs::write_in_claimed(&dir.join("cert.pem"), self.cert_pem.as_bytes())?;
        quiclab_outputs::write_in_claimed(&dir.join("key.pem"), self.key_pem.as_bytes())?;
        Ok(())
    }

    /// Reads `cert.pem` and `key.pem` written by [`LabCertificate::save`].
    pub fn load(cert: &Path, key: &Path) -> Result<LabCertificate> {
        let cert_pem = std::fs::read_to_string(cert)
            .with_context(|| format!("reading certificate {}", cert.display()))?;
        let key_pem = std::fs::read_to_string(key)
            .with_context(|| format!("reading key {}", key.display()))?;
        let cert_der = rustls_pemfile_cert(&cert_pem)
            .with_context(|| format!("{}: not a PEM certificate", cert.display()))?;
        let key_pair = rcgen::KeyPair::from_pem(&key_pem)
            .with_context(|| format!("{}: not a PEM private key", key.display()))?;
        let spki = sha2::Sha256::digest(rcgen::PublicKeyData::subject_public_key_info(&key_pair));
        Ok(LabCertificate {
            cert_der,
            key_der: key_pair.serialize_der(),
            cert_pem,
            key_pem,
            spki_sha256_base64: base64::engine::general_purpose::STANDARD.encode(spki),
        })
    }

    fn key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone()))
    }
}

/// Extracts the DER of the first certificate of a PEM text.
fn rustls_pemfile_cert(pem: &str) -> Option<CertificateDer<'static>> {
    let begin = "-----BEGIN CERTIFICATE-----";
    let end = "-----END CERTIFICATE-----";
    let start = pem.find(begin)? + begin.len();
    let stop = pem[start..].find(end)? + start;
    let b64: String = pem[start..stop].split_whitespace().collect();
    let der = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    Some(CertificateDer::from(der))
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn versions(v: Option<TlsVersion>) -> Vec<&'static rustls::SupportedProtocolVersion> {
    match v {
        Some(TlsVersion::Tls12) => vec![&rustls::version::TLS12],
        Some(TlsVersion::Tls13) => vec![&rustls::version::TLS13],
        None => vec![&rustls::version::TLS13, &rustls::version::TLS12],
    }
}

/// Server configuration for TCP (ALPN h2 and http/1.1), with session tickets for resumption.
pub fn tcp_server_config(
    cert: &LabCertificate,
    version: Option<TlsVersion>,
) -> Result<rustls::ServerConfig> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&versions(version))?
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert_der.clone()], cert.key())?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config.ticketer = rustls::crypto::ring::Ticketer::new()?;
    config.key_log = Arc::new(rustls::KeyLogFile::new());
    Ok(config)
}

/// Server configuration for QUIC (TLS 1.3 only, ALPN h3), with resumption and 0-RTT accepted.
pub fn quic_server_config(cert: &LabCertificate) -> Result<rustls::ServerConfig> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert_der.clone()], cert.key())?;
    config.alpn_protocols = vec![b"h3".to_vec()];
    // Stateful resumption (rustls's default in-memory session cache), not a stateless ticketer:
    // rustls refuses to allow early data in stateless tickets (anti-replay), so with a ticketer
    // no client could ever send 0-RTT.
    // QUIC requires exactly this value to accept 0-RTT (RFC 9001 §4.6.1).
    config.max_early_data_size = u32::MAX;
    config.key_log = Arc::new(rustls::KeyLogFile::new());
    Ok(config)
}

/// The client's session cache, counting the TLS 1.3 tickets it receives and uses, so that a report
/// can say whether a resumption was even possible.
#[derive(Debug)]
pub struct CountingSessionStore {
    inner: rustls::client::ClientSessionMemoryCache,
    received: AtomicU64,
    taken: AtomicU64,
}

impl Default for CountingSessionStore {
    fn default() -> Self {
        CountingSessionStore {
            inner: rustls::client::ClientSessionMemoryCache::new(256),
            received: AtomicU64::new(0),
            taken: AtomicU64::new(0),
        }
    }
}

impl CountingSessionStore {
    /// TLS 1.3 tickets received so far.
    pub fn tickets_received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// TLS 1.3 tickets taken to resume a connection so far.
    pub fn tickets_used(&self) -> u64 {
        self.taken.load(Ordering::Relaxed)
    }
}

impl rustls::client::ClientSessionStore for CountingSessionStore {
    fn set_kx_hint(&self, server_name: ServerName<'static>, group: rustls::NamedGroup) {
        self.inner.set_kx_hint(server_name, group)
    }

    fn kx_hint(&self, server_name: &ServerName<'_>) -> Option<rustls::NamedGroup> {
        self.inner.kx_hint(server_name)
    }

    fn set_tls12_session(
        &self,
        server_name: ServerName<'static>,
        value: rustls::client::Tls12ClientSessionValue,
    ) {
        self.inner.set_tls12_session(server_name, value)
    }

    fn tls12_session(
        &self,
        server_name: &ServerName<'_>,
    ) -> Option<rustls::client::Tls12ClientSessionValue> {
        self.inner.tls12_session(server_name)
    }

    fn remove_tls12_session(&self, server_name: &ServerName<'static>) {
        self.inner.remove_tls12_session(server_name)
    }

    fn insert_tls13_ticket(
        &self,
        server_name: ServerName<'static>,
        value: rustls::client::Tls13ClientSessionValue,
    ) {
        self.received.fetch_add(1, Ordering::Relaxed);
        self.inner.insert_tls13_ticket(server_name, value)
    }

    fn take_tls13_ticket(
        &self,
        server_name: &ServerName<'static>,
    ) -> Option<rustls::client::Tls13ClientSessionValue> {
        let t = self.inner.take_tls13_ticket(server_name);
        if t.is_some() {
            self.taken.fetch_add(1, Ordering::Relaxed);
        }
        t
    }
}

/// Client configuration trusting only the lab certificate; `SSLKEYLOGFILE` is honoured. Sessions
/// are kept in `store`.
pub fn client_config(
    cert: &LabCertificate,
    version: Option<TlsVersion>,
    alpn: &[u8],
    early_data: bool,
    store: Arc<CountingSessionStore>,
) -> Result<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.cert_der.clone())?;
    let versions = if alpn == b"h3" {
        vec![&rustls::version::TLS13]
    } else {
        versions(version)
    };
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&versions)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    config.enable_early_data = early_data;
    config.resumption = rustls::client::Resumption::store(store);
    config.key_log = Arc::new(rustls::KeyLogFile::new());
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_certificates_round_trip_through_pem() {
        let dir = std::env::temp_dir().join(format!("quiclab-cert-{}", std::process::id()));
        let c = LabCertificate::generate(&["100.64.0.2".parse().unwrap()]).unwrap();
        c.save(&dir).unwrap();
        let l = LabCertificate::load(&dir.join("cert.pem"), &dir.join("key.pem")).unwrap();
        assert_eq!(c.cert_der, l.cert_der);
        assert_eq!(c.spki_sha256_base64, l.spki_sha256_base64);
        assert_eq!(c.spki_sha256_base64.len(), 44);
        // Both configurations build from it.
        tcp_server_config(&l, Some(TlsVersion::Tls12)).unwrap();
        quic_server_config(&l).unwrap();
        client_config(
            &l,
            Some(TlsVersion::Tls13),
            b"h2",
            false,
            Default::default(),
        )
        .unwrap();
        let _ = std::fs::remove_dir_all(dir);
    }
}
