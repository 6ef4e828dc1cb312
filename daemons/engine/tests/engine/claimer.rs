//! The consumer loop's live queue view and pause watch: work queued or resumed while a
//! consumer is idle is picked up from watch events (the poll fallback is set far beyond
//! the test's deadline), and the lock-and-re-check rule still holds for the view.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use archivist_engine::consumer::{self, Claimer, ConsumerOptions};
use archivist_engine::ops::{self, Mode, Op};
use archivist_engine::schema::{paths, JobState};
use archivist_engine::{queue, store};
use tokio_util::sync::CancellationToken;

use crate::support::{create, job_in_state, Captured, ToLeased};

const NO_POLL: Duration = Duration::from_secs(600);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_queued_while_a_consumer_idles_are_claimed_from_watch_events() {
    let (config, session) = archivist_testkit::fresh_tree("view-events").await;
    let consumer_session = archivist_testkit::another_session(&config).await;
    let shutdown = CancellationToken::new();
    let options = ConsumerOptions::new(JobState::Pending, "viewer")
        .with_concurrency(2)
        .with_poll_interval(NO_POLL);
    let stop = shutdown.clone();
    let handle = tokio::spawn(async move {
        consumer::run(&consumer_session, options, Arc::new(ToLeased), stop).await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    for i in 0..5 {
        create(&session, i, 1_700_000_000_000 + i).await;
    }
    let done = archivist_testkit::eventually(Duration::from_secs(20), || async {
        queue::len(&session, JobState::Leased).await.unwrap() == 5
    })
    .await;
    shutdown.cancel();
    handle.await.unwrap().unwrap();
    assert!(
        done,
        "jobs queued while idle were not claimed without a poll"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_consumer_claims_nothing_until_resumed() {
    let (config, session) = archivist_testkit::fresh_tree("view-pause").await;
    let consumer_session = archivist_testkit::another_session(&config).await;
    let pause = paths::pause(JobState::Pending);
    ops::commit(
        &session,
        &[Op::Create {
            path: pause.clone(),
            data: b"by: test\n".to_vec(),
            mode: Mode::Persistent,
        }],
    )
    .await
    .unwrap();
    let shutdown = CancellationToken::new();
    let options = ConsumerOptions::new(JobState::Pending, "paused")
        .with_concurrency(2)
        .with_poll_interval(NO_POLL);
    let stop = shutdown.clone();
    let handle = tokio::spawn(async move {
        consumer::run(&consumer_session, options, Arc::new(ToLeased), stop).await
    });
    for i in 0..3 {
        create(&session, 0, 1_700_000_000_000 + i).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        queue::len(&session, JobState::Leased).await.unwrap(),
        0,
        "a paused state's consumer claimed work"
    );
    store::delete_if_present(&session, &pause).await.unwrap();
    let done = archivist_testkit::eventually(Duration::from_secs(20), || async {
        queue::len(&session, JobState::Leased).await.unwrap() == 3
    })
    .await;
    shutdown.cancel();
    handle.await.unwrap().unwrap();
    assert!(done, "resuming was not noticed without a poll");
}

#[tokio::test]
async fn a_claimer_re_checks_the_job_and_passes_over_an_entry_that_lies() {
    let (_config, session) = archivist_testkit::fresh_tree("view-recheck").await;
    // A pending-queue entry whose job is really leased (left behind, or moved meanwhile).
    let job = job_in_state(&session, JobState::Leased).await;
    ops::commit(
        &session,
        &[Op::Create {
            path: paths::queue_entry(JobState::Pending, &job.queue_entry().name()),
            data: vec![],
            mode: Mode::Persistent,
        }],
    )
    .await
    .unwrap();
    let real = create(&session, -1, 1_700_000_000_000).await;
    let mut claimer = Claimer::new(JobState::Pending, "checker", Duration::from_secs(5), 1);
    let stop = CancellationToken::new();
    let claimed = claimer
        .claim(&session, &HashSet::new(), &stop)
        .await
        .unwrap()
        .expect("the real pending job is claimed");
    assert_eq!(claimed.job.id, real.id);
    assert!(
        !archivist_testkit::locked(&session, &job.id).await,
        "the lock taken on the lying entry's job was not released"
    );
    assert!(claimer
        .claim(&session, &[real.id.clone()].into_iter().collect(), &stop)
        .await
        .unwrap()
        .is_none());
}

/// A step that moves claimed jobs to `leased` but asks the loop to pass over one job.
struct PassingOver(String);

impl archivist_engine::consumer::Step for PassingOver {
    async fn run(
        &self,
        c: archivist_engine::consumer::Claimed,
    ) -> Result<(), archivist_engine::EngineError> {
        archivist_engine::consumer::Step::run(&ToLeased, c).await
    }

    fn pass_over(&self) -> HashSet<String> {
        HashSet::from([self.0.clone()])
    }
}

/// The researcher's refused-job backoff runs on this hook (issue 17: the researcher on
/// the engine's consumer loop).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_the_step_passes_over_is_not_claimed() {
    let (config, session) = archivist_testkit::fresh_tree("view-pass-over").await;
    let consumer_session = archivist_testkit::another_session(&config).await;
    let left = create(&session, 0, 1_700_000_000_000).await;
    for i in 1..4 {
        create(&session, 0, 1_700_000_000_000 + i).await;
    }
    let shutdown = CancellationToken::new();
    let options = ConsumerOptions::new(JobState::Pending, "passing")
        .with_concurrency(2)
        .with_poll_interval(Duration::from_millis(100));
    let stop = shutdown.clone();
    let step = Arc::new(PassingOver(left.id.clone()));
    let handle =
        tokio::spawn(async move { consumer::run(&consumer_session, options, step, stop).await });
    let done = archivist_testkit::eventually(Duration::from_secs(20), || async {
        queue::len(&session, JobState::Leased).await.unwrap() == 3
    })
    .await;
    // A few more polls: the passed-over job stays where it is.
    tokio::time::sleep(Duration::from_millis(500)).await;
    shutdown.cancel();
    handle.await.unwrap().unwrap();
    assert!(done, "the other jobs were claimed");
    let (job, _) = archivist_engine::jobs::read(&session, &left.id)
        .await
        .unwrap();
    assert_eq!(
        job.status,
        JobState::Pending,
        "the passed-over job was claimed"
    );
}

/// A pending job whose record does not decode is passed over by the consumer, which
/// says so once (an error naming the job and the way out), not on every pass: the
/// researcher used to log it again at every poll, for as long as it waited. A job that
/// decodes is claimed as usual meanwhile. (Single-threaded runtime: the consumer's
/// claims run on this thread, where the capturing subscriber is the default.)
#[tokio::test]
async fn an_undecodable_job_in_the_queue_is_logged_once_not_every_pass() {
    let (captured, _default) = Captured::install();
    let (config, session) = archivist_testkit::fresh_tree("view-undecodable").await;
    let broken = create(&session, 5, 1_700_000_000_000).await;
    session
        .client()
        .set_data(&paths::job(&broken.id), b"{{{{", None)
        .await
        .unwrap();
    let fine = create(&session, 0, 1_700_000_000_000).await;
    let consumer_session = archivist_testkit::another_session(&config).await;
    let shutdown = CancellationToken::new();
    let options = ConsumerOptions::new(JobState::Pending, "undecodable")
        .with_concurrency(1)
        .with_poll_interval(Duration::from_millis(100));
    let stop = shutdown.clone();
    let handle = tokio::spawn(async move {
        consumer::run(&consumer_session, options, Arc::new(ToLeased), stop).await
    });
    let claimed = archivist_testkit::eventually(Duration::from_secs(20), || async {
        queue::len(&session, JobState::Leased).await.unwrap() == 1
    })
    .await;
    // Twenty polls or so: each lists the queue again and meets the broken job.
    tokio::time::sleep(Duration::from_secs(2)).await;
    shutdown.cancel();
    handle.await.unwrap().unwrap();
    assert!(claimed, "the job that decodes was not claimed");
    assert_eq!(
        archivist_testkit::queues_holding(&session, &fine.id).await,
        vec![JobState::Leased]
    );
    let logged = captured.lines_with(&broken.id);
    assert_eq!(
        logged,
        1,
        "the broken job was logged {logged} times:\n{}",
        String::from_utf8_lossy(&captured.0.lock().unwrap())
    );
    assert_eq!(captured.lines_with("unreadable job in queue"), 1);
    assert_eq!(
        archivist_testkit::queues_holding(&session, &broken.id).await,
        vec![JobState::Pending],
        "it waits for the work-item TTL or an operator"
    );
}
