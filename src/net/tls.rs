//! Client TLS configuration (rustls): roots, `--insecure`, `--cacert` (a CA, or the
//! server's own self-signed certificate trusted as such), versions, session resumption
//! on or off.

use std::sync::Arc;

use anyhow::Context;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{Resumption, WebPkiServerVerifier};
use rustls::crypto::aws_lc_rs::kx_group;
use rustls::crypto::{CryptoProvider, SupportedKxGroup};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// Which TLS versions the client offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TlsVersions {
    Any,
    Only12,
    Only13,
}

#[derive(Debug, Clone)]
pub(crate) struct TlsOptions {
    pub insecure: bool,
    /// Extra trusted roots (`--cacert`, or the embedded server's CA).
    pub extra_roots: Vec<CertificateDer<'static>>,
    /// Trust only `extra_roots` (when `--cacert` is given, like curl).
    pub only_extra_roots: bool,
    pub versions: TlsVersions,
    pub alpn: Vec<Vec<u8>>,
    /// TLS 1.3 early data (0-RTT) on resumed sessions whose ticket allows it.
    pub early_data: bool,
    /// The key-exchange groups offered, most preferred first (`--tls-groups`); none: the
    /// provider's default, as browsers offer them (X25519MLKEM768, x25519, secp256r1,
    /// secp384r1).
    pub groups: Option<Vec<&'static dyn SupportedKxGroup>>,
    /// The client certificate presented when a server asks (`--cert`, `--key`), and the
    /// count of what servers asked.
    pub client_auth: crate::net::client_auth::ClientAuth,
}

impl Default for TlsOptions {
    fn default() -> Self {
        TlsOptions {
            insecure: false,
            extra_roots: Vec::new(),
            only_extra_roots: false,
            versions: TlsVersions::Any,
            alpn: vec![b"http/1.1".to_vec()],
            early_data: false,
            groups: None,
            client_auth: Default::default(),
        }
    }
}

/// The key-exchange groups `--tls-groups` takes: the names accepted (IANA's, the first
/// listed in errors; P-256 and P-384 also as p256 and p384), and the group.
pub(crate) fn groups() -> [(&'static [&'static str], &'static dyn SupportedKxGroup); 7] {
    [
        (&["x25519mlkem768"], kx_group::X25519MLKEM768),
        (&["secp256r1mlkem768"], kx_group::SECP256R1MLKEM768),
        (&["x25519"], kx_group::X25519),
        (&["secp256r1", "p256", "p-256"], kx_group::SECP256R1),
        (&["secp384r1", "p384", "p-384"], kx_group::SECP384R1),
        (&["mlkem768"], kx_group::MLKEM768),
        (&["mlkem1024"], kx_group::MLKEM1024),
    ]
}

/// `--tls-groups x25519mlkem768,x25519,...`: the groups, most preferred first.
pub(crate) fn parse_groups(list: &str) -> Result<Vec<&'static dyn SupportedKxGroup>, String> {
    let mut out: Vec<&'static dyn SupportedKxGroup> = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let lower = name.to_ascii_lowercase();
        let Some(&(_, g)) = groups()
            .iter()
            .find(|(names, _)| names.contains(&lower.as_str()))
        else {
            let known: Vec<&str> = groups().iter().map(|(names, _)| names[0]).collect();
            return Err(format!(
                "unknown group {name:?} (known: {})",
                known.join(", ")
            ));
        };
        if out.iter().any(|o| o.name() == g.name()) {
            return Err(format!("{name:?} is named twice"));
        }
        out.push(g);
    }
    if out.is_empty() {
        return Err("no group named".into());
    }
    Ok(out)
}

/// aws-lc-rs (its default groups put X25519MLKEM768 first, as browsers do), with the
/// cipher suites in the order browsers offer them: AES-128-GCM first (its SHA-256 key
/// schedule runs on the CPU's SHA instructions, where SHA-384 has none), then
/// AES-256-GCM, then ChaCha20; TLS 1.3 before 1.2.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    let mut p = rustls::crypto::aws_lc_rs::default_provider();
    p.cipher_suites.sort_by_key(|s| {
        let name = format!("{:?}", s.suite());
        let tls12 = matches!(s, rustls::SupportedCipherSuite::Tls12(_));
        let aead = if name.contains("AES_128") {
            0
        } else if name.contains("AES_256") {
            1
        } else {
            2
        };
        (tls12, aead)
    });
    Arc::new(p)
}

/// Read every certificate of a PEM file.
pub(crate) fn load_pem_certs(
    flag: &str,
    path: &std::path::Path,
) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    use rustls::pki_types::pem::PemObject;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .with_context(|| format!("{flag} {}: cannot read", path.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("{flag} {}: not a PEM certificate file", path.display()))?;
    if certs.is_empty() {
        anyhow::bail!("{flag} {}: no certificate found", path.display());
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
pub(crate) fn client_config(
    opts: &TlsOptions,
    resumption: bool,
) -> anyhow::Result<Arc<ClientConfig>> {
    let mut provider = provider();
    if let Some(groups) = &opts.groups {
        Arc::make_mut(&mut provider).kx_groups.clone_from(groups);
    }
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
            .with_client_cert_resolver(Arc::new(opts.client_auth.clone()))
    } else {
        let webpki = WebPkiServerVerifier::builder_with_provider(
            Arc::new(root_store(opts)?),
            provider.clone(),
        )
        .build()
        .context("certificate verifier")?;
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Verifier {
                webpki,
                given: opts.extra_roots.clone(),
                verified: std::sync::Mutex::new(Vec::new()),
            }))
            .with_client_cert_resolver(Arc::new(opts.client_auth.clone()))
    };
    config.alpn_protocols = opts.alpn.clone();
    config.enable_early_data = opts.early_data;
    config.resumption = if resumption {
        Resumption::in_memory_sessions(1024)
    } else {
        Resumption::disabled()
    };
    Ok(Arc::new(config))
}

/// The client's verifier (all but `--insecure`): full WebPKI verification, with two
/// additions.
///
/// - A server certificate that is byte for byte one of the certificates given with
///   `--cacert` is trusted as an end-entity certificate, also when it is a self-signed CA
///   (`openssl req -x509` sets `CA:TRUE`, which WebPKI refuses as an end entity) or a
///   leaf whose issuer is not given: what OpenSSL-based curl and Node do. Its name and
///   validity period are still checked.
/// - Chains that verified are remembered, as browsers do (Chrome's certificate
///   verification cache): the same chain for the same name within [`VERIFIED_FOR_S`] is
///   not walked again, which saves a signature check per full handshake. Failures are
///   never remembered.
///
/// The server's signature over each handshake is always checked.
#[derive(Debug)]
struct Verifier {
    webpki: Arc<WebPkiServerVerifier>,
    /// The `--cacert` certificates (and the embedded server's CA).
    given: Vec<CertificateDer<'static>>,
    verified: std::sync::Mutex<Vec<Verified>>,
}

/// How long a verified chain is trusted without being walked again.
const VERIFIED_FOR_S: u64 = 60;
/// Most chains remembered (a run talks to few servers).
const VERIFIED_MAX: usize = 64;

#[derive(Debug)]
struct Verified {
    end_entity: Vec<u8>,
    intermediates: Vec<Vec<u8>>,
    server_name: String,
    ocsp: Vec<u8>,
    until_s: u64,
}

impl Verifier {
    /// WebPKI's verdict, or for a certificate given as is, its name and validity.
    fn walk(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let webpki_err =
            match self
                .webpki
                .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
            {
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
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let name = server_name.to_str();
        let same = |v: &Verified| {
            v.end_entity == end_entity.as_ref()
                && v.server_name == name.as_ref()
                && v.ocsp == ocsp
                && v.intermediates.len() == intermediates.len()
                && v.intermediates
                    .iter()
                    .zip(intermediates)
                    .all(|(a, b)| a.as_slice() == b.as_ref())
        };
        {
            let verified = self.verified.lock().unwrap_or_else(|p| p.into_inner());
            if verified
                .iter()
                .any(|v| same(v) && now.as_secs() < v.until_s)
            {
                return Ok(ServerCertVerified::assertion());
            }
        }
        let ok = self.walk(end_entity, intermediates, server_name, ocsp, now)?;
        let mut verified = self.verified.lock().unwrap_or_else(|p| p.into_inner());
        verified.retain(|v| !same(v) && now.as_secs() < v.until_s);
        if verified.len() >= VERIFIED_MAX {
            verified.remove(0);
        }
        verified.push(Verified {
            end_entity: end_entity.to_vec(),
            intermediates: intermediates.iter().map(|c| c.to_vec()).collect(),
            server_name: name.into_owned(),
            ocsp: ocsp.to_vec(),
            until_s: now.as_secs() + VERIFIED_FOR_S,
        });
        Ok(ok)
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
