//! Throwaway TLS material for the tests, generated at run time with rcgen (nothing
//! private is committed): a CA, a server certificate for `localhost` / `127.0.0.1`, a
//! client certificate from the same CA, and a second, unrelated CA with its own client
//! certificate (for "wrong CA" cases). Files live in a temporary directory.
//!
//! ```ignore
//! let pki = common::tls::Pki::generate();
//! let srv = TestServer::start(&pki.server_args());
//! let mut c = srv.client_with(|cfg| { cfg.provider = Provider::Tcp; cfg.tls = Some(pki.client_options()) }).unwrap();
//! ```
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

pub use dafs_client::TlsClientOptions;

pub struct Pki {
    dir: tempfile::TempDir,
}

struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

fn new_ca(name: &str) -> Ca {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let key = KeyPair::generate().unwrap();
    let cert = p.self_signed(&key).unwrap();
    Ca { cert, key }
}

fn leaf(ca: &Ca, names: &[&str], cn: &str, usage: ExtendedKeyUsagePurpose) -> (String, String) {
    let mut p =
        CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    p.distinguished_name.push(DnType::CommonName, cn);
    p.extended_key_usages = vec![usage];
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let key = KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, &ca.cert, &ca.key).unwrap();
    (cert.pem(), key.serialize_pem())
}

impl Pki {
    pub fn generate() -> Pki {
        let dir = tempfile::Builder::new().prefix("dafs-pki-").tempdir().unwrap();
        let w = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        let ca = new_ca("dafs test CA");
        w("ca.pem", &ca.cert.pem());
        let (c, k) = leaf(
            &ca,
            &["localhost", "127.0.0.1"],
            "dafsd test server",
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        w("server.pem", &c);
        w("server.key", &k);
        let (c, k) = leaf(&ca, &[], "dafs test client", ExtendedKeyUsagePurpose::ClientAuth);
        w("client.pem", &c);
        w("client.key", &k);
        let other = new_ca("unrelated CA");
        w("other-ca.pem", &other.cert.pem());
        let (c, k) = leaf(&other, &[], "stranger", ExtendedKeyUsagePurpose::ClientAuth);
        w("other-client.pem", &c);
        w("other-client.key", &k);
        Pki { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
    pub fn ca(&self) -> PathBuf {
        self.path("ca.pem")
    }
    pub fn other_ca(&self) -> PathBuf {
        self.path("other-ca.pem")
    }

    /// `dafsd` arguments for TLS (no client certificates).
    pub fn server_args(&self) -> Vec<String> {
        vec![
            "--tls-cert".into(),
            self.path("server.pem").display().to_string(),
            "--tls-key".into(),
            self.path("server.key").display().to_string(),
        ]
    }

    /// `dafsd` arguments for mutual TLS (the shared-memory provider must be off).
    pub fn server_args_mtls(&self) -> Vec<String> {
        let mut a = self.server_args();
        a.extend(["--tls-client-ca".into(), self.ca().display().to_string(), "--no-shm".into()]);
        a
    }

    /// Client options trusting this CA, no client certificate.
    pub fn client_options(&self) -> TlsClientOptions {
        TlsClientOptions { ca_file: Some(self.ca()), ..Default::default() }
    }

    /// Client options with the good client certificate.
    pub fn client_options_mtls(&self) -> TlsClientOptions {
        TlsClientOptions {
            cert_file: Some(self.path("client.pem")),
            key_file: Some(self.path("client.key")),
            ..self.client_options()
        }
    }
}

/// `&[String]` -> `Vec<&str>` for `TestServer::start`.
pub fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}
