//! Client certificates (mutual TLS): `--cert` and `--key` read and checked once (a PEM
//! chain; a PKCS#8, PKCS#1 or SEC1 key, in the certificate's file when `--key` is left
//! out, as curl reads them), presented when a server asks for one, and what the servers
//! asked counted: each CertificateRequest, whether a certificate answered it, and the
//! CAs the server named.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use rustls::client::ResolvesClientCert;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use rustls::SignatureScheme;

/// A client certificate and its key, checked to belong together.
#[derive(Debug)]
pub(crate) struct ClientIdentity {
    certified: Arc<CertifiedKey>,
    /// The leaf certificate's subject ("CN=client, O=example").
    pub subject: String,
    /// Its key's type and size: "ECDSA P-256", "RSA 2048", "Ed25519".
    pub key_type: String,
}

/// Read `cert` (and `key`, else the key in `cert`'s file): an error names the file and
/// what is wrong with it.
pub(crate) fn load(cert: &Path, key: Option<&Path>) -> Result<ClientIdentity, String> {
    let read = |flag: &str, p: &Path| {
        std::fs::read(p).map_err(|e| format!("{flag} {}: cannot read it: {e}", p.display()))
    };
    let cert_pem = read("--cert", cert)?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| {
            format!(
                "--cert {}: not a PEM certificate file ({e})",
                cert.display()
            )
        })?;
    if chain.is_empty() {
        return Err(format!(
            "--cert {}: no certificate in it (a PEM file, -----BEGIN CERTIFICATE-----)",
            cert.display()
        ));
    }
    let (flag, key_path, key_pem) = match key {
        Some(k) => ("--key", k, read("--key", k)?),
        None => ("--cert", cert, cert_pem.clone()),
    };
    let text = String::from_utf8_lossy(&key_pem);
    if text.contains("ENCRYPTED PRIVATE KEY") || text.contains("Proc-Type: 4,ENCRYPTED") {
        return Err(format!(
            "{flag} {}: the private key is encrypted, and handshake takes no passphrase (decrypt it: openssl pkey -in KEY -out KEY.plain)",
            key_path.display()
        ));
    }
    let private = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|_| match key {
        Some(_) => format!(
            "--key {}: no private key in it (PEM: PKCS#8 PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)",
            key_path.display()
        ),
        None => format!(
            "--cert {}: no private key in it: give the key with --key FILE",
            cert.display()
        ),
    })?;
    let signing = rustls::crypto::aws_lc_rs::sign::any_supported_type(&private)
        .map_err(|e| format!("{flag} {}: the key cannot sign ({e})", key_path.display()))?;
    let (subject, key_type, spki) =
        describe(&chain[0]).map_err(|e| format!("--cert {}: {e}", cert.display()))?;
    // The key's public half against the certificate's (read here, not by WebPKI, which
    // refuses what a server may still take: an X.509 v1 certificate, say).
    if signing
        .public_key()
        .is_some_and(|k| k.as_ref() != spki.as_slice())
    {
        return Err(format!(
            "{flag} {} does not match the certificate in --cert {}: its public key is another's",
            key_path.display(),
            cert.display()
        ));
    }
    let certified = CertifiedKey::new(chain, signing);
    Ok(ClientIdentity {
        certified: Arc::new(certified),
        subject,
        key_type,
    })
}

/// A certificate's subject and its key's type ("CN=client", "ECDSA P-256"), as a server
/// that verified it names it.
pub(crate) fn subject_and_key(der: &CertificateDer<'_>) -> Option<(String, String)> {
    describe(der).ok().map(|(s, k, _)| (s, k))
}

/// A certificate's subject, its key's type, and its public key (the DER
/// SubjectPublicKeyInfo).
fn describe(der: &CertificateDer<'_>) -> Result<(String, String, Vec<u8>), String> {
    use x509_parser::prelude::{FromDer, X509Certificate};
    use x509_parser::public_key::PublicKey;
    let (_, c) = X509Certificate::from_der(der.as_ref())
        .map_err(|e| format!("the certificate cannot be read ({e})"))?;
    let spki = c.public_key();
    let key_type = match spki.parsed() {
        Ok(PublicKey::RSA(k)) => format!("RSA {}", k.key_size()),
        Ok(PublicKey::EC(p)) => match p.key_size() {
            256 => "ECDSA P-256".to_string(),
            384 => "ECDSA P-384".to_string(),
            521 | 528 => "ECDSA P-521".to_string(),
            n => format!("ECDSA ({n} bits)"),
        },
        _ if spki.algorithm.algorithm.to_id_string() == "1.3.101.112" => "Ed25519".to_string(),
        _ => format!("key {}", spki.algorithm.algorithm.to_id_string()),
    };
    Ok((c.subject().to_string(), key_type, spki.raw.to_vec()))
}

/// What the servers asked of the client's certificate over a scenario's handshakes.
#[derive(Debug, Default)]
pub(crate) struct Asked {
    requested: AtomicU64,
    presented: AtomicU64,
    /// The CAs the first CertificateRequest named (their subjects; none: any CA).
    cas: OnceLock<Vec<String>>,
}

/// A snapshot of [`Asked`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AskedCounts {
    /// Handshakes in which the server sent a CertificateRequest.
    pub requested: u64,
    /// Of those, the handshakes in which the client presented a certificate.
    pub presented: u64,
    pub cas: Vec<String>,
}

impl Asked {
    pub(crate) fn counts(&self) -> AskedCounts {
        AskedCounts {
            requested: self.requested.load(Ordering::Relaxed),
            presented: self.presented.load(Ordering::Relaxed),
            cas: self.cas.get().cloned().unwrap_or_default(),
        }
    }
}

/// The client's side of client authentication: each CertificateRequest counted, and
/// the identity presented when there is one.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClientAuth {
    pub identity: Option<Arc<ClientIdentity>>,
    pub asked: Arc<Asked>,
}

impl ClientAuth {
    /// The same identity, counted apart (each scenario its own counts).
    pub(crate) fn counted_apart(&self) -> ClientAuth {
        ClientAuth {
            identity: self.identity.clone(),
            asked: Arc::default(),
        }
    }
}

impl ResolvesClientCert for ClientAuth {
    fn resolve(
        &self,
        root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        self.asked.requested.fetch_add(1, Ordering::Relaxed);
        self.asked
            .cas
            .get_or_init(|| root_hint_subjects.iter().map(|n| name(n)).collect());
        let id = self.identity.as_ref()?;
        self.asked.presented.fetch_add(1, Ordering::Relaxed);
        Some(id.certified.clone())
    }

    fn has_certs(&self) -> bool {
        self.identity.is_some()
    }
}

/// A distinguished name as a CertificateRequest carries it (DER: the Name's SEQUENCE,
/// or without it, as rustls documents its hints), written as OpenSSL writes a subject.
fn name(der: &[u8]) -> String {
    use x509_parser::prelude::{FromDer, X509Name};
    let whole = |d: &[u8]| match X509Name::from_der(d) {
        Ok((rest, n)) if rest.is_empty() && n.iter().count() > 0 => Some(n.to_string()),
        _ => None,
    };
    whole(der)
        .or_else(|| whole(&in_sequence(der)))
        .unwrap_or_else(|| format!("(a name that cannot be read: {} bytes)", der.len()))
}

/// `inner` in a DER SEQUENCE.
fn in_sequence(inner: &[u8]) -> Vec<u8> {
    let mut der = vec![0x30];
    let n = inner.len();
    if n < 0x80 {
        der.push(n as u8);
    } else {
        let len = n.to_be_bytes();
        let skip = len.iter().take_while(|b| **b == 0).count();
        der.push(0x80 | (len.len() - skip) as u8);
        der.extend_from_slice(&len[skip..]);
    }
    der.extend_from_slice(inner);
    der
}

#[cfg(test)]
mod tests {
    use super::{load, name};

    fn write(dir: &std::path::Path, file: &str, text: &str) -> std::path::PathBuf {
        let p = dir.join(file);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn a_certificate_and_its_key_load_and_what_is_wrong_is_named() {
        let dir =
            std::env::temp_dir().join(format!("handshake-client-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["client".to_string()]).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "client one");
        let cert = params.self_signed(&key).unwrap();
        let c = write(&dir, "c.pem", &cert.pem());
        let k = write(&dir, "k.pem", &key.serialize_pem());
        let both = write(
            &dir,
            "both.pem",
            &format!("{}{}", cert.pem(), key.serialize_pem()),
        );
        let id = load(&c, Some(&k)).unwrap();
        assert_eq!(id.key_type, "ECDSA P-256");
        assert_eq!(id.subject, "CN=client one");
        // The key in the certificate's file, as curl reads it.
        assert_eq!(load(&both, None).unwrap().subject, "CN=client one");
        let e = load(&c, None).unwrap_err();
        assert!(e.contains("no private key") && e.contains("--key"), "{e}");
        // Another key: refused, naming both files.
        let other = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let o = write(&dir, "other.pem", &other.serialize_pem());
        let e = load(&c, Some(&o)).unwrap_err();
        assert!(
            e.contains("does not match") && e.contains("other.pem"),
            "{e}"
        );
        // An encrypted key, a missing file, a file of something else.
        let enc = write(
            &dir,
            "enc.pem",
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n",
        );
        assert!(load(&c, Some(&enc)).unwrap_err().contains("encrypted"));
        let e = load(&dir.join("none.pem"), None).unwrap_err();
        assert!(e.starts_with("--cert") && e.contains("cannot read"), "{e}");
        let e = load(&k, None).unwrap_err();
        assert!(e.contains("no certificate"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_requested_ca_name_reads_as_a_subject() {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut params = rcgen::CertificateParams::new(vec![]).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "Test Client CA");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "handshake");
        let cert = params.self_signed(&key).unwrap();
        let (_, c) =
            <x509_parser::prelude::X509Certificate as x509_parser::prelude::FromDer<_>>::from_der(
                cert.der(),
            )
            .unwrap();
        // The subject's DER, with its SEQUENCE (as OpenSSL sends it) or without.
        let raw = c.subject().as_raw();
        for der in [raw, &raw[2..]] {
            let n = name(der);
            assert!(
                n.contains("CN=Test Client CA") && n.contains("O=handshake"),
                "{n}"
            );
        }
        assert!(name(&[1, 2, 3]).contains("cannot be read"));
    }
}
