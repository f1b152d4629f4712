//! The embedded server's certificates: a CA generated at start and a leaf for
//! localhost, 127.0.0.1, ::1 and the lab's server address signed by it; session
//! resumption with tickets and ids; and, where asked, client certificates (mutual TLS:
//! verified against a client CA, or any, its signature checked).

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::ServerConfig;

pub(crate) struct Certs {
    pub ca_pem: String,
    pub ca_der: CertificateDer<'static>,
    pub server_config: Arc<ServerConfig>,
    /// For QUIC (HTTP/3): ALPN h3, its own session cache; early data (then without
    /// limit, as QUIC requires) when asked.
    pub quic_config: Arc<ServerConfig>,
}

/// Asking clients for a certificate (mutual TLS): the CAs that may sign one, read from a
/// PEM file, and whether a client without one is served.
#[derive(Debug, Clone)]
pub struct ClientCerts {
    /// The CAs; none: any certificate is taken, its signature of the handshake checked
    /// and its chain not (the embedded server, which knows no client CA, asking so that
    /// a client's `--cert` costs what it costs).
    pub roots: Option<Arc<rustls::RootCertStore>>,
    /// A client without a certificate is refused in the handshake (else served).
    pub required: bool,
}

impl ClientCerts {
    /// The CAs in `path` (PEM), for `flag`: an error naming the flag and the file when it
    /// cannot be read or holds no certificate.
    pub(crate) fn load(
        flag: &str,
        path: &std::path::Path,
        required: bool,
    ) -> Result<ClientCerts, String> {
        let certs = crate::net::tls::load_pem_certs(flag, path).map_err(|e| format!("{e:#}"))?;
        let mut roots = rustls::RootCertStore::empty();
        let (added, _) = roots.add_parsable_certificates(certs);
        if added == 0 {
            return Err(format!(
                "{flag} {}: no CA certificate in it that can verify a client's",
                path.display()
            ));
        }
        Ok(ClientCerts {
            roots: Some(Arc::new(roots)),
            required,
        })
    }
}

/// Asks for a client certificate and takes any: the handshake's signature is checked
/// against the certificate's key, its chain is not.
#[derive(Debug)]
struct AnyClientCert {
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
    required: bool,
}

impl rustls::server::danger::ClientCertVerifier for AnyClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        self.required
    }

    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::server::danger::ClientCertVerified, rustls::Error> {
        Ok(rustls::server::danger::ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// What the server's TLS offers: HTTP/2 by ALPN, early data, the names its certificate
/// carries, its size, and whether it asks clients for a certificate.
#[derive(Debug, Clone, Default)]
pub(crate) struct Offer {
    /// Offer HTTP/2 by ALPN.
    pub h2: bool,
    /// Issue tickets that allow 16 KiB of TLS 1.3 early data, and answer it as 0.5-RTT
    /// data.
    pub early_data: bool,
    /// The address the server is bound to, when it is not loopback: named too.
    pub also: Option<std::net::IpAddr>,
    /// The leaf carries extra names until leaf and CA are about that many bytes (a long
    /// chain or a large key, as far as the first flight goes).
    pub chain_bytes: Option<usize>,
    /// Ask each client for a certificate these CAs signed.
    pub client_certs: Option<ClientCerts>,
}

/// A fresh CA and server certificate for localhost, 127.0.0.1, ::1 and what `offer`
/// adds, with the server's TLS configurations.
pub(crate) fn generate(offer: &Offer) -> anyhow::Result<Certs> {
    let Offer {
        h2,
        early_data,
        also,
        chain_bytes,
        ref client_certs,
    } = *offer;
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "handshake embedded server CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let leaf_key = KeyPair::generate()?;
    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    names.extend(also.filter(|ip| !ip.is_loopback()).map(|ip| ip.to_string()));
    let sign = |names: Vec<String>| -> anyhow::Result<rcgen::Certificate> {
        let mut leaf_params = CertificateParams::new(names)?;
        leaf_params
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        Ok(leaf_params.signed_by(&leaf_key, &issuer)?)
    };
    let mut leaf = sign(names.clone())?;
    let base = leaf.der().len() + ca_cert.der().len();
    if let Some(extra) = chain_bytes
        .and_then(|b| b.checked_sub(base))
        .filter(|e| *e > 0)
    {
        // Each name "p00000.pad.handshake.invalid" takes 30 bytes in the DER.
        let mut padded = names;
        padded.extend((0..extra.div_ceil(30)).map(|i| format!("p{i:05}.pad.handshake.invalid")));
        leaf = sign(padded)?;
    }

    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let chain = vec![leaf.der().clone(), ca_cert.der().clone()];
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let builder = match client_certs {
        None => builder.with_no_client_auth(),
        Some(ClientCerts {
            roots: Some(roots),
            required,
        }) => {
            let v = rustls::server::WebPkiClientVerifier::builder_with_provider(
                roots.clone(),
                provider,
            );
            let v = if *required {
                v
            } else {
                v.allow_unauthenticated()
            };
            builder.with_client_cert_verifier(v.build()?)
        }
        Some(ClientCerts {
            roots: None,
            required,
        }) => builder.with_client_cert_verifier(Arc::new(AnyClientCert {
            algorithms: provider.signature_verification_algorithms,
            required: *required,
        })),
    };
    let mut config = builder.with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec(), b"http/1.0".to_vec()];
    if h2 {
        config.alpn_protocols.insert(0, b"h2".to_vec());
    }
    config.session_storage = rustls::server::ServerSessionMemoryCache::new(4096);
    if early_data {
        config.max_early_data_size = 16 * 1024;
        config.send_half_rtt_data = true;
        // rustls takes early data only on stateful resumption (a ticket is then an id
        // into the session cache, used once): no stateless ticketer.
    } else {
        config.ticketer = rustls::crypto::aws_lc_rs::Ticketer::new()?;
    }
    let mut quic = config.clone();
    quic.alpn_protocols = vec![b"h3".to_vec()];
    quic.session_storage = rustls::server::ServerSessionMemoryCache::new(4096);
    quic.max_early_data_size = if early_data { u32::MAX } else { 0 };
    quic.send_half_rtt_data = false;
    Ok(Certs {
        ca_pem: ca_cert.pem(),
        ca_der: ca_cert.der().clone(),
        server_config: Arc::new(config),
        quic_config: Arc::new(quic),
    })
}
