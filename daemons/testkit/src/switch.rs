//! A cuttable proxy in front of the test ZooKeeper: an outage as one client sees it,
//! without touching the shared server.

/// A loopback TCP proxy in front of the real ZooKeeper that can be cut (every relayed
/// connection dropped, new ones closed at once) and restored: an outage of ZooKeeper
/// as a client sees it, without touching the shared server.
pub struct Switch {
    /// The proxy's address, to connect through.
    pub addr: String,
    up: std::sync::Arc<std::sync::atomic::AtomicBool>,
    relays: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl Switch {
    /// Starts the proxy on a free loopback port, relaying to the test ZooKeeper.
    pub async fn start() -> Switch {
        use std::sync::atomic::Ordering;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let addr = listener.local_addr().expect("address").to_string();
        let up = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let relays = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (is_up, held) = (up.clone(), relays.clone());
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if !is_up.load(Ordering::SeqCst) {
                    continue;
                }
                let upstream = crate::zk_connect();
                let upstream = upstream.split(',').next().unwrap_or("").to_string();
                let relay = tokio::spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                held.lock().expect("relays").push(relay.abort_handle());
            }
        });
        Switch { addr, up, relays }
    }

    /// Drops every relayed connection and refuses new ones.
    pub fn cut(&self) {
        self.up.store(false, std::sync::atomic::Ordering::SeqCst);
        for r in self.relays.lock().expect("relays").drain(..) {
            r.abort();
        }
    }

    /// Relays new connections again.
    pub fn restore(&self) {
        self.up.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}
