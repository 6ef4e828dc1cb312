//! A loopback proxy in front of the real ZooKeeper that loses one reply on demand: the
//! request is forwarded (the server applies it), the server's answer is dropped and the
//! client's connection reset (RST, which the client reports as an I/O error), so a
//! write's outcome is unknown to its caller exactly as at a leader change or a network
//! blip. The session lives on and reconnects through the same proxy.
//!
//! [`LostReply::cut_next`] loses the reply to the next request; [`LostReply::cut_next_multi`]
//! to the next multi (a state transition), whatever reads come before it;
//! [`LostReply::cut_multi_after`] to a later one. [`LostReply::slow_reconnect`] makes the
//! client's reconnect after a cut take a while, as after a leader change (a read right
//! after the reset then fails too). Shared by the
//! engine's and the daemons' lost-reply tests (outside testing of issues 17 and 21).

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    knobs: Arc<Knobs>,
}

/// What the proxy's connections share besides the cut itself.
#[derive(Debug)]
struct Knobs {
    /// Multis still to pass before the armed multi cut applies.
    skip_multis: AtomicU32,
    /// After the multi cut, the opcode of the request whose reply is lost next (0: none).
    then_opcode: AtomicI32,
    /// How long connections made after a cut wait before they are relayed (ms).
    reconnect_delay_ms: AtomicU64,
    /// Until when (ms since `epoch`) new connections wait.
    hold_until_ms: AtomicU64,
    epoch: Instant,
}

impl Knobs {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }
}

impl LostReply {
    /// Starts a proxy to `upstream` (`host:port`) on a free loopback port.
    pub async fn start(upstream: String) -> LostReply {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy address").to_string();
        let cut = Arc::new(AtomicI32::new(OFF));
        let knobs = Arc::new(Knobs {
            skip_multis: AtomicU32::new(0),
            then_opcode: AtomicI32::new(OFF),
            reconnect_delay_ms: AtomicU64::new(0),
            hold_until_ms: AtomicU64::new(0),
            epoch: Instant::now(),
        });
        let armed = cut.clone();
        let shared = knobs.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let (armed, shared) = (armed.clone(), shared.clone());
                tokio::spawn(async move {
                    let hold = shared
                        .hold_until_ms
                        .load(Ordering::SeqCst)
                        .saturating_sub(shared.now_ms());
                    tokio::time::sleep(Duration::from_millis(hold)).await;
                    if let Ok(server) = TcpStream::connect(&upstream).await {
                        relay(client, server, armed, shared).await;
                    }
                });
            }
        });
        LostReply { addr, cut, knobs }
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

    /// Loses the reply to the multi after the next `skip` multis (0: the next one).
    pub fn cut_multi_after(&self, skip: u32) {
        self.knobs.skip_multis.store(skip, Ordering::SeqCst);
        self.cut.store(MULTI, Ordering::SeqCst);
    }

    /// Like [`LostReply::cut_multi_after`], and then loses the reply to the next request
    /// with ZooKeeper opcode `opcode` too (4: `getData`, the read that asks whether the
    /// multi applied), so the caller's first look after the loss fails as well.
    pub fn cut_multi_after_then(&self, skip: u32, opcode: i32) {
        self.knobs.then_opcode.store(opcode, Ordering::SeqCst);
        self.cut_multi_after(skip);
    }

    /// After each cut, connections wait `delay` before they are relayed, so the client
    /// is without a connection that long.
    pub fn slow_reconnect(&self, delay: Duration) {
        self.knobs
            .reconnect_delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
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

async fn relay(
    mut client: TcpStream,
    mut server: TcpStream,
    cut: Arc<AtomicI32>,
    knobs: Arc<Knobs>,
) {
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
                        if op == 11 || !(want == ANY || want == op) {
                            continue;
                        }
                        if want == MULTI
                            && knobs.skip_multis.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok()
                        {
                            continue;
                        }
                        if cut.compare_exchange(want, OFF, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
                            armed = true;
                            let then = knobs.then_opcode.swap(OFF, Ordering::SeqCst);
                            if want == MULTI && then != OFF {
                                cut.store(then, Ordering::SeqCst);
                            }
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
        let delay = knobs.reconnect_delay_ms.load(Ordering::SeqCst);
        knobs
            .hold_until_ms
            .store(knobs.now_ms() + delay, Ordering::SeqCst);
        let _ = client.set_zero_linger();
    }
}
