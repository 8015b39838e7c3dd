//! Optional TLS (rustls, `ring` provider) for the TCP provider.
//!
//! TLS wraps the byte stream only: the frames on it (MSG / PUT / GET / GET_RESP, see
//! [`crate::frame`]) and the server-initiated placement semantics are exactly those of
//! plain TCP. Decrypted PUT payloads are copied from rustls' buffer straight into the
//! registered region (no pool buffer in between); GET_RESP bytes are encrypted straight
//! from the region.
//!
//! Both ends are non-blocking: [`TlsLink`] drives a `rustls::Connection` with
//! `read_tls` / `process_new_packets` / `write_tls` over the socket's descriptor.
//! Invariant the server's event loop relies on: a read through a [`TlsLink`] reports
//! `WouldBlock` only when rustls holds no decrypted plaintext, no received ciphertext
//! is left unprocessed, and the socket itself would block. So a reader that drains until
//! `WouldBlock` (as `ServerConn::poll_event` callers do) never leaves input behind that
//! the readiness descriptor does not signal.
//!
//! The shared-memory provider has no TLS: it is same-host only, and nothing it carries
//! crosses a network.

use std::fmt;
use std::io::{self, IoSlice, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConnection, Connection, RootCertStore, ServerConnection};

use crate::TransportError;

/// Most TLS output buffered inside rustls per connection (beyond what the kernel took).
/// Counted in full in the server's backlog while any is pending.
pub const TLS_BUFFER_LIMIT: usize = 256 * 1024;
/// Ciphertext read from the socket per system call.
const TLS_READ_CHUNK: usize = 64 * 1024;

/// Where a client looks for CA certificates when none is configured.
const SYSTEM_CA_FILES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];

/// Server-side TLS settings (PEM files).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsServerOptions {
    /// Certificate chain, leaf first.
    pub cert_file: PathBuf,
    /// Private key (PKCS#8, PKCS#1 or SEC1).
    pub key_file: PathBuf,
    /// When set, clients must present a certificate issued by one of these CAs (mutual TLS).
    pub client_ca_file: Option<PathBuf>,
}

/// Client-side TLS settings (PEM files).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsClientOptions {
    /// CA certificates the server's certificate must chain to. `None`: the system bundle
    /// (`SSL_CERT_FILE`, else the usual distribution paths).
    pub ca_file: Option<PathBuf>,
    /// Name to verify the server certificate against (default: the host part of the
    /// target address; an IP address is checked against IP subject alternative names).
    pub server_name: Option<String>,
    /// Client certificate chain for servers that require one (mutual TLS).
    pub cert_file: Option<PathBuf>,
    /// Private key of `cert_file`.
    pub key_file: Option<PathBuf>,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn config_err(msg: String) -> TransportError {
    TransportError::Tls(msg)
}

fn load_certs(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, TransportError> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|e| config_err(format!("cannot read {what} {}: {e}", path.display())))?
        .collect::<Result<_, _>>()
        .map_err(|e| config_err(format!("bad PEM in {what} {}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(config_err(format!("no certificate found in {what} {}", path.display())));
    }
    Ok(certs)
}

fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TransportError> {
    PrivateKeyDer::from_pem_file(path)
        .map_err(|e| config_err(format!("cannot load a private key from {}: {e}", path.display())))
}

fn load_roots(path: &Path) -> Result<RootCertStore, TransportError> {
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(load_certs(path, "CA file")?);
    if added == 0 {
        return Err(config_err(format!("no usable CA certificate in {}", path.display())));
    }
    Ok(roots)
}

impl TlsServerOptions {
    /// Load the files and build the rustls configuration (errors name the file).
    pub fn build(&self) -> Result<Arc<rustls::ServerConfig>, TransportError> {
        let certs = load_certs(&self.cert_file, "certificate file")?;
        let key = load_key(&self.key_file)?;
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| config_err(format!("TLS configuration: {e}")))?;
        let builder = match &self.client_ca_file {
            Some(ca) => {
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(load_roots(ca)?),
                    provider(),
                )
                .build()
                .map_err(|e| config_err(format!("client CA {}: {e}", ca.display())))?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let cfg = builder.with_single_cert(certs, key).map_err(|e| {
            config_err(format!(
                "certificate {} / key {}: {e}",
                self.cert_file.display(),
                self.key_file.display()
            ))
        })?;
        Ok(Arc::new(cfg))
    }
}

impl TlsClientOptions {
    /// Load the files and build the rustls configuration (errors name the file).
    pub fn build(&self) -> Result<Arc<rustls::ClientConfig>, TransportError> {
        let roots = match &self.ca_file {
            Some(p) => load_roots(p)?,
            None => {
                let env = std::env::var_os("SSL_CERT_FILE").map(PathBuf::from);
                let found = env
                    .into_iter()
                    .chain(SYSTEM_CA_FILES.iter().map(PathBuf::from))
                    .find(|p| p.is_file());
                let p = found.ok_or_else(|| {
                    config_err("no CA file given and no system CA bundle found".into())
                })?;
                load_roots(&p)?
            }
        };
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| config_err(format!("TLS configuration: {e}")))?
            .with_root_certificates(roots);
        let cfg = match (&self.cert_file, &self.key_file) {
            (Some(c), Some(k)) => builder
                .with_client_auth_cert(load_certs(c, "client certificate file")?, load_key(k)?)
                .map_err(|e| {
                    config_err(format!(
                        "client certificate {} / key {}: {e}",
                        c.display(),
                        k.display()
                    ))
                })?,
            (None, None) => builder.with_no_client_auth(),
            _ => {
                return Err(config_err(
                    "a client certificate needs both a certificate file and a key file".into(),
                ))
            }
        };
        Ok(Arc::new(cfg))
    }

    /// The name the server certificate is checked against when connecting to `addr`
    /// ("host:port", "[v6]:port").
    pub fn server_name_for(&self, addr: &str) -> Result<ServerName<'static>, TransportError> {
        let host = match &self.server_name {
            Some(n) => n.as_str(),
            None => host_of(addr),
        };
        ServerName::try_from(host.to_string())
            .map_err(|_| config_err(format!("{host:?} is not a valid TLS server name")))
    }
}

/// "host:port" -> "host"; "[::1]:port" -> "::1".
fn host_of(addr: &str) -> &str {
    if let Some(rest) = addr.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match addr.rsplit_once(':') {
        Some((h, _)) => h,
        None => addr,
    }
}

/// A TLS failure carried inside an `io::Error` through the generic stream code, turned
/// back into [`TransportError::Tls`] by [`classify`].
#[derive(Debug)]
struct TlsFailure(String);

impl fmt::Display for TlsFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TlsFailure {}

/// An I/O error from a stream that may be TLS: TLS failures become
/// [`TransportError::Tls`], everything else [`TransportError::Io`].
pub(crate) fn classify(e: io::Error) -> TransportError {
    if let Some(f) = e.get_ref().and_then(|i| i.downcast_ref::<TlsFailure>()) {
        return TransportError::Tls(f.0.clone());
    }
    TransportError::Io(e)
}

fn describe(e: &rustls::Error, handshaking: bool) -> String {
    use rustls::AlertDescription as A;
    let hint = match e {
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. }
            if handshaking =>
        {
            " (is the peer speaking TLS?)"
        }
        rustls::Error::AlertReceived(A::CertificateRequired) => {
            " (the server requires a client certificate)"
        }
        rustls::Error::AlertReceived(
            A::UnknownCA | A::BadCertificate | A::CertificateUnknown | A::AccessDenied,
        ) => " (the peer refused our certificate)",
        _ => "",
    };
    if handshaking {
        format!("TLS handshake failed: {e}{hint}")
    } else {
        format!("TLS error: {e}{hint}")
    }
}

/// Writes with MSG_NOSIGNAL: a peer that went away is an EPIPE error, never a SIGPIPE.
/// Rust binaries ignore SIGPIPE, but C programs (and Python) embedding the client
/// library do not, and would die on a write to a dead server. Used by plain TCP too.
struct FdWriter<'a>(BorrowedFd<'a>);

impl Write for FdWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        rustix::net::send(self.0, buf, rustix::net::SendFlags::NOSIGNAL).map_err(io::Error::from)
    }
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        rustix::net::sendmsg(
            self.0,
            bufs,
            &mut rustix::net::SendAncillaryBuffer::default(),
            rustix::net::SendFlags::NOSIGNAL,
        )
        .map_err(io::Error::from)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Non-blocking TLS state of one connection (either end). The socket is passed in on
/// every call, so the owner keeps it for readiness and addresses.
pub(crate) struct TlsLink {
    conn: Connection,
    /// Ciphertext read from the socket, not yet handed to rustls: `rbuf[rpos..rend]`.
    rbuf: Box<[u8]>,
    rpos: usize,
    rend: usize,
    eof: bool,
    /// rustls may hold decrypted bytes not yet read (cleared when a read finds none).
    plaintext_buffered: bool,
}

impl TlsLink {
    fn new(mut conn: Connection) -> Self {
        conn.set_buffer_limit(Some(TLS_BUFFER_LIMIT));
        TlsLink {
            conn,
            rbuf: vec![0u8; TLS_READ_CHUNK].into_boxed_slice(),
            rpos: 0,
            rend: 0,
            eof: false,
            plaintext_buffered: false,
        }
    }

    pub(crate) fn server(cfg: Arc<rustls::ServerConfig>) -> Result<Self, TransportError> {
        let c = ServerConnection::new(cfg)
            .map_err(|e| TransportError::Tls(format!("TLS setup: {e}")))?;
        Ok(Self::new(Connection::Server(c)))
    }

    /// Connect-side handshake, run to completion before any frame is exchanged so that
    /// certificate and name errors surface at connect time.
    pub(crate) fn client_handshake(
        fd: BorrowedFd<'_>,
        cfg: Arc<rustls::ClientConfig>,
        name: ServerName<'static>,
        deadline: Instant,
    ) -> Result<Self, TransportError> {
        let shown = format!("{name:?}");
        let c = ClientConnection::new(cfg, name)
            .map_err(|e| TransportError::Tls(format!("TLS setup for {shown}: {e}")))?;
        let mut link = Self::new(Connection::Client(c));
        loop {
            let flushed = link.push(fd).map_err(|e| link.handshake_io_error(e))?;
            if !link.conn.is_handshaking() && flushed {
                return Ok(link);
            }
            if link.conn.is_handshaking() && link.conn.wants_read() {
                match link.feed(fd) {
                    Ok(true) => continue,
                    Ok(false) => {}
                    Err(e) => return Err(link.handshake_io_error(e)),
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(TransportError::Tls("TLS handshake timed out".into()));
            }
            crate::wait::sleep_on_fd(fd, link.conn.wants_write(), Some(deadline))?;
        }
    }

    fn handshake_io_error(&self, e: io::Error) -> TransportError {
        match classify(e) {
            TransportError::Io(e) if matches!(e.kind(), io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe) => {
                TransportError::Tls("the server closed the connection during the TLS handshake (does it serve TLS on this port?)".into())
            }
            other => other,
        }
    }

    /// Read decrypted bytes. `WouldBlock` only when nothing is buffered anywhere and the
    /// socket would block (see the module invariant). `Ok(0)`: the peer closed (TLS
    /// close_notify); an unclean close is `UnexpectedEof`.
    pub(crate) fn read(&mut self, fd: BorrowedFd<'_>, dst: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.conn.reader().read(dst) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.plaintext_buffered = false,
                Err(e) => return Err(e),
            }
            if !self.feed(fd)? {
                return Err(io::ErrorKind::WouldBlock.into());
            }
        }
    }

    /// Hand ciphertext to rustls and process it. Ok(false): nothing new (would block).
    fn feed(&mut self, fd: BorrowedFd<'_>) -> io::Result<bool> {
        if self.rpos == self.rend {
            if self.eof {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            loop {
                match rustix::io::read(fd, &mut self.rbuf[..]) {
                    Ok(0) => {
                        self.eof = true;
                        // An empty reader tells rustls about the end of the stream.
                        self.conn.read_tls(&mut io::empty())?;
                        self.process(fd)?;
                        return Ok(true);
                    }
                    Ok(n) => {
                        self.rpos = 0;
                        self.rend = n;
                        break;
                    }
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(rustix::io::Errno::AGAIN) => return Ok(false),
                    Err(e) => return Err(e.into()),
                }
            }
        }
        let n = self.conn.read_tls(&mut &self.rbuf[self.rpos..self.rend])?;
        self.rpos += n;
        self.process(fd)?;
        Ok(true)
    }

    fn process(&mut self, fd: BorrowedFd<'_>) -> io::Result<()> {
        let handshaking = self.conn.is_handshaking();
        match self.conn.process_new_packets() {
            Ok(st) => {
                if st.plaintext_bytes_to_read() > 0 {
                    self.plaintext_buffered = true;
                }
                // Handshake messages, tickets, key updates: best effort now, the rest on
                // the next flush.
                let _ = self.push(fd);
                Ok(())
            }
            Err(e) => {
                // rustls queued an alert for the peer: try to deliver it.
                let _ = self.push(fd);
                Err(io::Error::other(TlsFailure(describe(&e, handshaking))))
            }
        }
    }

    /// Encrypt what rustls accepts of `bufs` and push ciphertext to the socket.
    /// `WouldBlock` when rustls' output buffer is full and the socket takes no more.
    pub(crate) fn write_vectored(
        &mut self,
        fd: BorrowedFd<'_>,
        bufs: &[IoSlice<'_>],
    ) -> io::Result<usize> {
        self.push(fd)?;
        let n = self.conn.writer().write_vectored(bufs)?;
        self.push(fd)?;
        if n == 0 && bufs.iter().any(|b| !b.is_empty()) {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }

    /// Write buffered ciphertext to the socket. Ok(true) when none is left.
    pub(crate) fn push(&mut self, fd: BorrowedFd<'_>) -> io::Result<bool> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut FdWriter(fd)) {
                Ok(0) => return Ok(false),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Tell the peer we are done (TLS close_notify), best effort, never blocking.
    pub(crate) fn close(&mut self, fd: BorrowedFd<'_>) {
        self.conn.send_close_notify();
        let _ = self.push(fd);
    }

    /// Ciphertext waiting inside rustls for the socket.
    pub(crate) fn wants_write(&self) -> bool {
        self.conn.wants_write()
    }

    /// Input already taken off the socket but not yet read by the application.
    pub(crate) fn has_buffered_input(&self) -> bool {
        self.plaintext_buffered || self.rpos < self.rend
    }
}

/// The byte stream of one TCP connection, plain or TLS, as the framing code sees it.
pub(crate) struct Io<'a> {
    fd: BorrowedFd<'a>,
    tls: Option<&'a mut TlsLink>,
}

impl<'a> Io<'a> {
    pub(crate) fn new<S: AsFd>(sock: &'a S, tls: &'a mut Option<Box<TlsLink>>) -> Self {
        Io { fd: sock.as_fd(), tls: tls.as_deref_mut() }
    }
}

impl Read for Io<'_> {
    fn read(&mut self, dst: &mut [u8]) -> io::Result<usize> {
        match self.tls.as_deref_mut() {
            Some(t) => t.read(self.fd, dst),
            None => rustix::io::read(self.fd, dst).map_err(io::Error::from),
        }
    }
}

impl Write for Io<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[IoSlice::new(buf)])
    }
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match self.tls.as_deref_mut() {
            Some(t) => t.write_vectored(self.fd, bufs),
            None => FdWriter(self.fd).write_vectored(bufs),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_part() {
        assert_eq!(host_of("example.org:7420"), "example.org");
        assert_eq!(host_of("127.0.0.1:1"), "127.0.0.1");
        assert_eq!(host_of("[::1]:7420"), "::1");
        assert_eq!(host_of("bare"), "bare");
    }

    #[test]
    fn config_errors_name_the_file() {
        let o = TlsServerOptions {
            cert_file: "/nonexistent/cert.pem".into(),
            key_file: "/nonexistent/key.pem".into(),
            client_ca_file: None,
        };
        let e = o.build().unwrap_err().to_string();
        assert!(e.contains("/nonexistent/cert.pem"), "{e}");
        let c =
            TlsClientOptions { ca_file: Some("/nonexistent/ca.pem".into()), ..Default::default() };
        assert!(c.build().unwrap_err().to_string().contains("/nonexistent/ca.pem"));
        let half =
            TlsClientOptions { ca_file: None, cert_file: Some("/x".into()), ..Default::default() };
        let _ = half.build(); // either no system bundle or the half-configured client cert: an error
        assert!(half.build().is_err());
    }
}
