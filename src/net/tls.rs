//! Client TLS configuration (rustls): roots, `--insecure`, `--cacert`, versions,
//! session resumption on or off.

use std::sync::Arc;

use anyhow::Context;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::Resumption;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// Which TLS versions the client offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersions {
    Any,
    Only12,
    Only13,
}

#[derive(Debug, Clone)]
pub struct TlsOptions {
    pub insecure: bool,
    /// Extra trusted roots (`--cacert`, or the embedded server's CA).
    pub extra_roots: Vec<CertificateDer<'static>>,
    /// Trust only `extra_roots` (when `--cacert` is given, like curl).
    pub only_extra_roots: bool,
    pub versions: TlsVersions,
    pub alpn: Vec<Vec<u8>>,
}

impl Default for TlsOptions {
    fn default() -> Self {
        TlsOptions {
            insecure: false,
            extra_roots: Vec::new(),
            only_extra_roots: false,
            versions: TlsVersions::Any,
            alpn: vec![b"http/1.1".to_vec()],
        }
    }
}

pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Read every certificate of a PEM file.
pub fn load_pem_certs(path: &std::path::Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    use rustls::pki_types::pem::PemObject;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .with_context(|| format!("--cacert {}: cannot read", path.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("--cacert {}: not a PEM certificate file", path.display()))?;
    if certs.is_empty() {
        anyhow::bail!("--cacert {}: no certificate found", path.display());
    }
    Ok(certs)
}

fn root_store(opts: &TlsOptions) -> anyhow::Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    for c in &opts.extra_roots {
        roots
            .add(c.clone())
            .context("adding a trusted certificate")?;
    }
    if !opts.only_extra_roots {
        let native = rustls_native_certs::load_native_certs();
        let (added, _) = roots.add_parsable_certificates(native.certs);
        if added == 0 {
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        }
    }
    Ok(roots)
}

/// Build a client configuration; `resumption` turns TLS session resumption on or off.
pub fn client_config(opts: &TlsOptions, resumption: bool) -> anyhow::Result<Arc<ClientConfig>> {
    let provider = provider();
    let versions: &[&'static rustls::SupportedProtocolVersion] = match opts.versions {
        TlsVersions::Any => &[&rustls::version::TLS13, &rustls::version::TLS12],
        TlsVersions::Only12 => &[&rustls::version::TLS12],
        TlsVersions::Only13 => &[&rustls::version::TLS13],
    };
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .context("TLS versions")?;
    let mut config = if opts.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAny(provider)))
            .with_no_client_auth()
    } else {
        builder
            .with_root_certificates(root_store(opts)?)
            .with_no_client_auth()
    };
    config.alpn_protocols = opts.alpn.clone();
    config.resumption = if resumption {
        Resumption::in_memory_sessions(1024)
    } else {
        Resumption::disabled()
    };
    Ok(Arc::new(config))
}

/// `--insecure`: accept any certificate, but still check handshake signatures.
#[derive(Debug)]
struct AcceptAny(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
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
        rustls::crypto::verify_tls12_signature(
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
        rustls::crypto::verify_tls13_signature(
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
