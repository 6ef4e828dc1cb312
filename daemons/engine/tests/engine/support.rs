use archivist_engine::jobs::{self, NewJob};
use archivist_engine::schema::records::JobRecord;
use archivist_engine::schema::JobState;
use archivist_engine::Session;

pub fn new_job(episode: &str, priority: i64, curated_ms: i64) -> NewJob {
    NewJob {
        episode: episode.to_string(),
        media_url: format!("http://127.0.0.1:1/{episode}.mp3"),
        clips: vec!["c000001".into(), "c000002".into()],
        priority,
        curated_ms,
        batch: None,
    }
}

pub async fn create(session: &Session, priority: i64, curated_ms: i64) -> JobRecord {
    jobs::create(
        session,
        &new_job("e0000001", priority, curated_ms),
        "test",
        |_| vec![],
    )
    .await
    .expect("create job")
}

/// Puts a fresh job directly into `state` (test setup only: bypasses the table).
pub async fn job_in_state(session: &Session, state: JobState) -> JobRecord {
    let job = create(session, 0, 1_700_000_000_000).await;
    archivist_testkit::place_job(session, job, state).await
}

/// The queues holding an entry for the job (the test kit's one copy).
pub use archivist_testkit::queues_holding;

/// A step that moves the claimed job to `leased` and releases its lock.
pub struct ToLeased;

impl archivist_engine::consumer::Step for ToLeased {
    async fn run(
        &self,
        c: archivist_engine::consumer::Claimed,
    ) -> Result<(), archivist_engine::EngineError> {
        archivist_engine::transition::Transition::new(
            archivist_engine::transition::Role::Researcher,
            &c.job,
            c.version,
            JobState::Leased,
        )
        .lock(archivist_engine::transition::LockAction::Release(
            c.lock.clone(),
        ))
        .commit(&c.session)
        .await?;
        Ok(())
    }
}

/// Log lines written while a test runs, for counting.
#[derive(Clone, Default)]
pub struct Captured(pub std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// Captures INFO and above on this thread (the default subscriber while the guard
    /// lives); run the test on a single-threaded runtime so the code under test logs here.
    pub fn install() -> (Captured, tracing::subscriber::DefaultGuard) {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .finish();
        let guard = tracing::subscriber::set_default(subscriber);
        (captured, guard)
    }

    pub fn lines_with(&self, needle: &str) -> usize {
        let text = String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned();
        text.lines().filter(|l| l.contains(needle)).count()
    }
}
