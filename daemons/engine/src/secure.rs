//! TLS and SASL on the ZooKeeper connection, and naming the cause when a secured
//! connection cannot be set up.
//!
//! The client (`zookeeper-client`, features `tls` and `sasl-digest-md5`) does the TLS
//! handshake and the SASL exchange itself. When a handshake fails it only retries until
//! its timeout, so after a failed connect [`diagnose`] makes one handshake of its own with
//! rustls (the TLS library the client uses) and the same files, and says what went wrong:
//! a plaintext client on a TLS port or the reverse, an untrusted or expired server
//! certificate, a hostname mismatch, or a client certificate the server wanted.

use std::io::Read;
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use zookeeper_client as zk;

use crate::config::{SaslConfig, TlsConfig, ZkConfig};
use crate::error::{EngineError, Result};

/// How long the diagnosing handshake waits for the server at each step.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// rustls needs one process-wide crypto provider when more than one is compiled in (the
/// ZooKeeper client brings aws-lc-rs, the HTTP client ring); ring serves both.
fn install_crypto_provider() {
    // Fails only when a provider is installed already, which is as good.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn unreadable(key: &str, path: &Path, why: impl std::fmt::Display) -> EngineError {
    EngineError::Config(format!(
        "zookeeper.tls.{key}: cannot use {}: {why}",
        path.display()
    ))
}

fn read_file(key: &str, path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| unreadable(key, path, e))
}

fn identity_paths(tls: &TlsConfig) -> Result<Option<(&Path, &Path)>> {
    match (&tls.cert, &tls.key) {
        (Some(cert), Some(key)) => Ok(Some((cert, key))),
        (None, None) => Ok(None),
        _ => Err(EngineError::Config(
            "zookeeper.tls.cert and zookeeper.tls.key go together: give both or neither".into(),
        )),
    }
}

/// The client's TLS options from the configured PEM files.
///
/// # Errors
/// [`EngineError::Config`] naming the setting when a file is unreadable or holds no
/// certificate or key.
pub fn tls_options(tls: &TlsConfig) -> Result<zk::TlsOptions> {
    install_crypto_provider();
    let ca = read_file("ca", &tls.ca)?;
    let mut options = zk::TlsOptions::new()
        .with_pem_ca(&ca)
        .map_err(|e| unreadable("ca", &tls.ca, e))?;
    if let Some((cert, key)) = identity_paths(tls)? {
        options = options
            .with_pem_identity(&read_file("cert", cert)?, &read_file("key", key)?)
            .map_err(|e| unreadable("cert/key", cert, e))?;
    }
    if !tls.verify_hostname {
        tracing::warn!(
            "TLS hostname verification to ZooKeeper is off (zookeeper.tls.verify_hostname: false): \
             any server with a certificate from the CA can pose as ZooKeeper"
        );
        // SAFETY: not a memory-safety matter; the client marks this call unsafe because it
        // weakens authentication. The operator asked for it and the warning above says so.
        options = unsafe { options.with_no_hostname_verification() };
    }
    Ok(options)
}

/// The client's SASL options (DIGEST-MD5).
pub fn sasl_options(sasl: &SaslConfig) -> zk::SaslOptions {
    zk::SaslOptions::digest_md5(
        sasl.credentials.user.clone(),
        sasl.credentials.password.clone(),
    )
    .into()
}

/// Why the server refused a session that did connect (`AuthFailed` on connect or on the
/// first request), or `None` for other errors.
pub fn auth_refusal(config: &ZkConfig, error: &zk::Error) -> Option<String> {
    if *error != zk::Error::AuthFailed {
        return None;
    }
    Some(match &config.sasl {
        Some(sasl) => format!(
            "SASL authentication as {:?} failed: wrong user or password, or the server's JAAS \
             `Server` section does not list the user (zookeeper.sasl)",
            sasl.credentials.user
        ),
        None => "the server refuses unauthenticated clients (enforce.auth.enabled or \
                 sessionRequireClientSASLAuth): configure zookeeper.sasl (user and password)"
            .to_string(),
    })
}

/// After a failed connect: one handshake with the first server, to name the cause.
/// `None` when it finds nothing wrong with TLS (the server is then down or unreachable).
pub async fn diagnose(config: &ZkConfig) -> Option<String> {
    let (hosts, _) = config.hosts_and_chroot();
    let (host, port) = first_host(&hosts)?;
    let tls = config.tls.clone();
    let (h, p) = (host.clone(), port);
    let outcome = tokio::task::spawn_blocking(move || match &tls {
        Some(tls) => client_config(tls).map(|c| handshake(&h, p, c, None)),
        None => {
            let saw = Arc::new(AtomicBool::new(false));
            Ok(handshake(&h, p, any_certificate(saw.clone()), Some(saw)))
        }
    })
    .await
    .ok()?;
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(e) => return Some(e.to_string()),
    };
    let at = format!("{host}:{port}");
    match (&config.tls, outcome) {
        (None, Handshake::SawCertificate) => Some(format!(
            "{at} speaks TLS (a secureClientPort) and this client connects in plaintext: \
             configure zookeeper.tls (ca, and cert and key if the server wants client certificates)"
        )),
        (None, _) => None,
        (Some(_), Handshake::Failed(e)) => Some(tls_failure(config, &host, &at, &e)),
        (Some(_), Handshake::Closed(why)) => Some(if answers_plaintext(&at).await {
            format!(
                "{at} serves plaintext ZooKeeper, not TLS: point zookeeper.connect at the \
                 servers' secureClientPort, or turn zookeeper.tls off"
            )
        } else {
            format!("{at} closed the connection during the TLS handshake ({why})")
        }),
        (Some(_), Handshake::Done | Handshake::SawCertificate | Handshake::Unreachable) => None,
    }
}

fn tls_failure(config: &ZkConfig, host: &str, at: &str, e: &rustls::Error) -> String {
    let ca = config
        .tls
        .as_ref()
        .map(|t| t.ca.display().to_string())
        .unwrap_or_default();
    let has_identity = config.tls.as_ref().is_some_and(|t| t.cert.is_some());
    match e {
        rustls::Error::InvalidCertificate(cert) => match cert {
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => format!(
                "the certificate {at} presented has expired ({cert}): the server needs a renewed certificate"
            ),
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                format!("the certificate {at} presented is not valid yet ({cert}): check the clocks")
            }
            CertificateError::UnknownIssuer | CertificateError::BadSignature => format!(
                "the certificate {at} presented is not signed by a CA in zookeeper.tls.ca ({ca}): untrusted"
            ),
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                format!(
                    "hostname mismatch: the certificate {at} presented does not name {host:?} ({cert}); \
                     connect by a name the certificate lists"
                )
            }
            other => format!("the certificate {at} presented was refused: {other}"),
        },
        rustls::Error::AlertReceived(alert) => {
            if has_identity {
                format!("{at} refused the TLS handshake ({alert:?}): it does not accept the client certificate in zookeeper.tls.cert")
            } else {
                format!("{at} refused the TLS handshake ({alert:?}): it wants a client certificate (ssl.clientAuth=need); set zookeeper.tls.cert and zookeeper.tls.key")
            }
        }
        other => format!("TLS handshake with {at} failed: {other}"),
    }
}

/// `host:port` of the first server of a connect string (`tcp+tls://` prefixes allowed).
fn first_host(hosts: &str) -> Option<(String, u16)> {
    let first = hosts.split(',').next()?.trim();
    let first = first.split_once("://").map_or(first, |(_, rest)| rest);
    match first.rsplit_once(':') {
        Some((host, port)) => Some((host.to_string(), port.parse().ok()?)),
        None => Some((first.to_string(), 2181)),
    }
}

/// Does a plaintext ZooKeeper server answer there? Sends a plaintext `ConnectRequest`
/// and reads the `ConnectResponse` the server writes before anything else, so a server
/// that then closes the session (it enforces SASL: `sessionRequireClientSASLAuth`,
/// `enforce.auth.enabled`) is recognised too; a client session would not get that far.
/// Closes the probe's session at once.
async fn answers_plaintext(at: &str) -> bool {
    matches!(
        tokio::time::timeout(PROBE_TIMEOUT, probe_plaintext(at)).await,
        Ok(Ok(true))
    )
}

async fn probe_plaintext(at: &str) -> std::io::Result<bool> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(at).await?;
    // ConnectRequest (jute): protocolVersion, lastZxidSeen, timeOut, sessionId, passwd
    // (a 16-byte buffer), readOnly; framed by its length.
    let mut request = Vec::with_capacity(48);
    request.extend_from_slice(&0i32.to_be_bytes());
    request.extend_from_slice(&0i64.to_be_bytes());
    request.extend_from_slice(&4000i32.to_be_bytes());
    request.extend_from_slice(&0i64.to_be_bytes());
    request.extend_from_slice(&16i32.to_be_bytes());
    request.extend_from_slice(&[0u8; 16]);
    request.push(0);
    let mut framed = (request.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&request);
    stream.write_all(&framed).await?;
    // ConnectResponse: length, protocolVersion (0), timeOut (> 0), sessionId (non-zero).
    let mut head = [0u8; 20];
    stream.read_exact(&mut head).await?;
    let field =
        |at: usize| i32::from_be_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
    let session = i64::from_be_bytes([
        head[12], head[13], head[14], head[15], head[16], head[17], head[18], head[19],
    ]);
    let zookeeper =
        (20..=1024).contains(&field(0)) && field(4) == 0 && field(8) > 0 && session != 0;
    if zookeeper {
        // closeSession (xid 1, type -11), so the probe's session does not linger.
        let mut close = 8i32.to_be_bytes().to_vec();
        close.extend_from_slice(&1i32.to_be_bytes());
        close.extend_from_slice(&(-11i32).to_be_bytes());
        let _ = stream.write_all(&close).await;
    }
    Ok(zookeeper)
}

/// The rustls configuration the client would use, built from the same files.
fn client_config(tls: &TlsConfig) -> Result<Arc<ClientConfig>> {
    let provider = provider();
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(&tls.ca).map_err(|e| unreadable("ca", &tls.ca, e))? {
        roots
            .add(cert.map_err(|e| unreadable("ca", &tls.ca, e))?)
            .map_err(|e| unreadable("ca", &tls.ca, e))?;
    }
    let verifier = WebPkiServerVerifier::builder_with_provider(roots.into(), provider.clone())
        .build()
        .map_err(|e| unreadable("ca", &tls.ca, e))?;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| EngineError::Config(format!("TLS setup: {e}")))?
        .with_webpki_verifier(verifier);
    let config = match identity_paths(tls)? {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .map_err(|e| unreadable("cert", cert, e))?
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| unreadable("cert", cert, e))?;
            let key_der =
                PrivateKeyDer::from_pem_file(key).map_err(|e| unreadable("key", key, e))?;
            builder
                .with_client_auth_cert(chain, key_der)
                .map_err(|e| unreadable("key", key, e))?
        }
    };
    Ok(Arc::new(config))
}

/// A configuration that accepts no certificate but notes that the server sent one: it
/// proves the port speaks TLS without trusting anything.
fn any_certificate(saw: Arc<AtomicBool>) -> Arc<ClientConfig> {
    let provider = provider();
    let verifier = Arc::new(NotesCertificate {
        saw,
        provider: provider.clone(),
    });
    match ClientConfig::builder_with_provider(provider).with_safe_default_protocol_versions() {
        Ok(builder) => Arc::new(
            builder
                .dangerous()
                .with_custom_certificate_verifier(verifier)
                .with_no_client_auth(),
        ),
        // The ring provider supports the default versions; unreachable in practice.
        Err(_) => Arc::new(
            ClientConfig::builder()
                .dangerous()
                .with_custom_certificate_verifier(verifier)
                .with_no_client_auth(),
        ),
    }
}

#[derive(Debug)]
struct NotesCertificate {
    saw: Arc<AtomicBool>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for NotesCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        self.saw.store(true, Ordering::SeqCst);
        Err(rustls::Error::General(
            "probe only: no certificate is trusted".into(),
        ))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// What one handshake found.
#[derive(Debug)]
enum Handshake {
    /// Completed, and the server did not object to us right after.
    Done,
    /// The server sent a certificate (probe without trust).
    SawCertificate,
    /// TLS failed with this error (ours or the server's alert).
    Failed(rustls::Error),
    /// The server closed the connection without speaking TLS.
    Closed(String),
    /// No TCP connection.
    Unreachable,
}

fn handshake(
    host: &str,
    port: u16,
    config: Arc<ClientConfig>,
    saw: Option<Arc<AtomicBool>>,
) -> Handshake {
    let Some(addr) = (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
    else {
        return Handshake::Unreachable;
    };
    let Ok(mut sock) = TcpStream::connect_timeout(&addr, PROBE_TIMEOUT) else {
        return Handshake::Unreachable;
    };
    let _ = sock.set_read_timeout(Some(PROBE_TIMEOUT));
    let _ = sock.set_write_timeout(Some(PROBE_TIMEOUT));
    let Ok(name) = ServerName::try_from(host.to_string()) else {
        return Handshake::Failed(rustls::Error::General(format!(
            "{host:?} is no server name"
        )));
    };
    let mut conn = match rustls::ClientConnection::new(config, name) {
        Ok(conn) => conn,
        Err(e) => return Handshake::Failed(e),
    };
    let saw_certificate = || saw.as_ref().is_some_and(|s| s.load(Ordering::SeqCst));
    while conn.is_handshaking() {
        if let Err(e) = conn.complete_io(&mut sock) {
            if saw_certificate() {
                return Handshake::SawCertificate;
            }
            return classify(e);
        }
    }
    // With TLS 1.3 the server judges our certificate after our last handshake message:
    // a refusal arrives as an alert on the first read.
    let _ = sock.set_read_timeout(Some(Duration::from_millis(1500)));
    let mut byte = [0u8; 1];
    match rustls::Stream::new(&mut conn, &mut sock).read(&mut byte) {
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Handshake::Done
        }
        Err(e) => classify(e),
        Ok(_) => Handshake::Done,
    }
}

fn classify(e: std::io::Error) -> Handshake {
    if let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
        return match tls {
            rustls::Error::InvalidMessage(_) => Handshake::Closed(format!("not TLS: {tls}")),
            other => Handshake::Failed(other.clone()),
        };
    }
    Handshake::Closed(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::first_host;

    #[test]
    fn first_host_takes_the_first_server_with_or_without_a_scheme() {
        assert_eq!(first_host("a:1,b:2"), Some(("a".into(), 1)));
        assert_eq!(
            first_host("tcp+tls://zk1:2281,zk2:2281"),
            Some(("zk1".into(), 2281))
        );
        assert_eq!(first_host("zk"), Some(("zk".into(), 2181)));
    }
}
