//! TLS for fecq: a self-signed certificate generated at start; the client accepts any server
//! certificate (it cannot know one generated at the server's start) but still checks the
//! handshake signatures. Ring is the only crypto provider. Stack-independent: each stack's glue
//! wraps these rustls configurations in its own QUIC crypto types.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use crate::options::config::Capture;
use crate::options::qlog::KeyLogFile;

pub const ALPN: &[u8] = b"fecq";

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The TLS secrets go to `--keylog-file` when it is given (crate::options::qlog).
fn key_log(capture: &Capture) -> Result<Option<Arc<dyn rustls::KeyLog>>, String> {
    Ok(KeyLogFile::open(capture)?.map(|k| k as Arc<dyn rustls::KeyLog>))
}

/// The server's rustls configuration (any QUIC stack wraps it).
pub fn server_rustls(capture: &Capture) -> Result<rustls::ServerConfig, String> {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()])
        .map_err(|e| format!("certificate generation failed: {e}"))?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        certified.signing_key.serialize_der(),
    ));
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(vec![certified.cert.der().clone()], key)
        .map_err(|e| e.to_string())?;
    cfg.alpn_protocols = vec![ALPN.to_vec()];
    if let Some(log) = key_log(capture)? {
        cfg.key_log = log;
    }
    Ok(cfg)
}

/// The client's rustls configuration (any QUIC stack wraps it).
pub fn client_rustls(capture: &Capture) -> Result<rustls::ClientConfig, String> {
    let provider = provider();
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyServerCert(provider)))
        .with_no_client_auth();
    cfg.alpn_protocols = vec![ALPN.to_vec()];
    if let Some(log) = key_log(capture)? {
        cfg.key_log = log;
    }
    Ok(cfg)
}

#[derive(Debug)]
struct AnyServerCert(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyServerCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
