//! The embedded server's certificates: a CA generated at start and a leaf for
//! localhost, 127.0.0.1, ::1 and the lab's server address signed by it; session resumption with tickets and ids.

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

/// A fresh CA and server certificate for localhost, 127.0.0.1, ::1 and `also` (the
/// address the server is bound to, when it is not loopback); `h2`: offer HTTP/2 by
/// ALPN; `early_data`: issue tickets that allow 16 KiB of TLS 1.3 early data, and
/// answer it as 0.5-RTT data.
/// `chain_bytes`: the leaf carries extra names until leaf and CA are about that many
/// bytes (a long chain or a large key, as far as the first flight goes).
pub(crate) fn generate(
    h2: bool,
    early_data: bool,
    also: Option<std::net::IpAddr>,
    chain_bytes: Option<usize>,
) -> anyhow::Result<Certs> {
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
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
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
