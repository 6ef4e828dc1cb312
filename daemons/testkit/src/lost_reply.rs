//! A loopback proxy in front of the real ZooKeeper that loses one reply on demand: the
//! request is forwarded (the server applies it), the server's answer is dropped and the
//! client's connection reset (RST, which the client reports as an I/O error), so a
//! write's outcome is unknown to its caller exactly as at a leader change or a network
//! blip. The session lives on and reconnects through the same proxy.
//!
//! [`LostReply::cut_next`] loses the reply to the next request; [`LostReply::cut_next_multi`]
//! to the next multi (a state transition), whatever reads come before it. Shared by the
//! engine's and the daemons' lost-reply tests (outside testing of issues 17 and 21).

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Not armed.
const OFF: i32 = 0;
/// Armed for the next request of any kind.
const ANY: i32 = -1;
/// ZooKeeper's opcode of a multi request.
const MULTI: i32 = 14;

/// A running proxy; see the module doc.
#[derive(Debug, Clone)]
pub struct LostReply {
    addr: String,
    cut: Arc<AtomicI32>,
}

impl LostReply {
    /// Starts a proxy to `upstream` (`host:port`) on a free loopback port.
    pub async fn start(upstream: String) -> LostReply {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy address").to_string();
        let cut = Arc::new(AtomicI32::new(OFF));
        let armed = cut.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                tokio::spawn(relay(client, server, armed.clone()));
            }
        });
        LostReply { addr, cut }
    }

    /// The address to connect to instead of ZooKeeper's.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Loses the reply to the next request the client sends.
    pub fn cut_next(&self) {
        self.cut.store(ANY, Ordering::SeqCst);
    }

    /// Loses the reply to the next multi the client sends (reads before it pass).
    pub fn cut_next_multi(&self) {
        self.cut.store(MULTI, Ordering::SeqCst);
    }

    /// Is a cut still waiting for its request?
    pub fn armed(&self) -> bool {
        self.cut.load(Ordering::SeqCst) != OFF
    }
}

/// The opcodes of the complete request frames at the start of `pending` (each frame is a
/// 4-byte length and its payload, which starts with the xid and the opcode), consuming
/// them; the first frame of a connection (`connect`, which has no opcode) is `None`.
fn opcodes(pending: &mut Vec<u8>, first: &mut bool) -> Vec<Option<i32>> {
    let mut out = Vec::new();
    while let Some(len) = pending.get(..4) {
        let len = i32::from_be_bytes([len[0], len[1], len[2], len[3]]).max(0) as usize;
        if pending.len() < 4 + len {
            break;
        }
        let frame: Vec<u8> = pending.drain(..4 + len).collect();
        if std::mem::take(first) {
            out.push(None);
        } else {
            out.push(
                frame
                    .get(8..12)
                    .map(|op| i32::from_be_bytes([op[0], op[1], op[2], op[3]])),
            );
        }
    }
    out
}

async fn relay(mut client: TcpStream, mut server: TcpStream, cut: Arc<AtomicI32>) {
    let _ = client.set_nodelay(true);
    let mut armed = false;
    let mut first = true;
    let mut pending = Vec::new();
    {
        // Borrowed halves: dropping them sends no FIN, so the reset below is the first
        // thing the client sees.
        let (mut client_read, mut client_write) = client.split();
        let (mut server_read, mut server_write) = server.split();
        let mut up = vec![0u8; 64 * 1024];
        let mut down = vec![0u8; 64 * 1024];
        loop {
            tokio::select! {
                read = client_read.read(&mut up) => {
                    let n = match read { Ok(0) | Err(_) => break, Ok(n) => n };
                    pending.extend_from_slice(&up[..n]);
                    for op in opcodes(&mut pending, &mut first).into_iter().flatten() {
                        let want = cut.load(Ordering::SeqCst);
                        // Pings (opcode 11) are not the request a test means.
                        if op != 11 && (want == ANY || want == op)
                            && cut.compare_exchange(want, OFF, Ordering::SeqCst, Ordering::SeqCst).is_ok()
                        {
                            armed = true;
                        }
                    }
                    if server_write.write_all(&up[..n]).await.is_err() {
                        break;
                    }
                }
                read = server_read.read(&mut down) => {
                    let n = match read { Ok(0) | Err(_) => break, Ok(n) => n };
                    if armed {
                        // The request was applied; its reply is lost with the connection.
                        break;
                    }
                    if client_write.write_all(&down[..n]).await.is_err() {
                        break;
                    }
                }
            }
        }
    }
    if armed {
        let _ = client.set_zero_linger();
    }
}
