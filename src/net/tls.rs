//! Client TLS configuration (rustls): roots, `--insecure`, `--cacert` (a CA, or the
//! server's own self-signed certificate trusted as such), versions, session resumption
//! on or off.

use std::sync::Arc;

use anyhow::Context;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{Resumption, WebPkiServerVerifier};
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
    } else if opts.extra_roots.is_empty() {
        builder
            .with_root_certificates(root_store(opts)?)
            .with_no_client_auth()
    } else {
        let webpki = WebPkiServerVerifier::builder_with_provider(
            Arc::new(root_store(opts)?),
            provider.clone(),
        )
        .build()
        .context("certificate verifier")?;
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(TrustedAsGiven {
                webpki,
                given: opts.extra_roots.clone(),
            }))
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

/// Full WebPKI verification, plus: a server certificate that is byte for byte one of the
/// certificates given with `--cacert` is trusted as an end-entity certificate, also when
/// it is a self-signed CA (`openssl req -x509` sets `CA:TRUE`, which WebPKI refuses as
/// an end entity) or a leaf whose issuer is not given: what OpenSSL-based curl and Node
/// do. Its name and validity period are still checked, and the handshake's signatures
/// are verified as usual.
#[derive(Debug)]
struct TrustedAsGiven {
    webpki: Arc<WebPkiServerVerifier>,
    given: Vec<CertificateDer<'static>>,
}

impl ServerCertVerifier for TrustedAsGiven {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verdict =
            self.webpki
                .verify_server_cert(end_entity, intermediates, server_name, ocsp, now);
        let webpki_err = match verdict {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        if !self.given.iter().any(|c| c.as_ref() == end_entity.as_ref()) {
            return Err(webpki_err);
        }
        let parsed = rustls::server::ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_name(&parsed, server_name)?;
        check_validity(end_entity, now)?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// The certificate's notBefore/notAfter against `now`, as WebPKI would check them.
fn check_validity(cert: &CertificateDer<'_>, now: UnixTime) -> Result<(), rustls::Error> {
    use rustls::CertificateError;
    use x509_parser::prelude::{FromDer, X509Certificate};
    let (_, x509) = X509Certificate::from_der(cert.as_ref())
        .map_err(|_| rustls::Error::InvalidCertificate(CertificateError::BadEncoding))?;
    let now = now.as_secs() as i64;
    let validity = x509.validity();
    if now < validity.not_before.timestamp() {
        return Err(rustls::Error::InvalidCertificate(
            CertificateError::NotValidYet,
        ));
    }
    if now > validity.not_after.timestamp() {
        return Err(rustls::Error::InvalidCertificate(CertificateError::Expired));
    }
    Ok(())
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
