//! A claim whose reply was lost (outside 17i G4): the claim multi applied on the server,
//! the researcher saw a connection reset, dropped the lock and walked away; the job sat
//! in `leased` with nobody working on it until the reaper blamed a "lost" researcher.
//! Now the researcher re-reads the job, finds its claim applied and its lock its own,
//! and goes on. The reply is lost by a loopback proxy in front of the real ZooKeeper.

use std::time::Duration;

use archivist_engine::schema::{paths, JobState};
use archivist_engine::{member, ZkConfig};
use archivist_testkit::eventually;
use archivist_testkit::lost_reply::LostReply;

use crate::http::{Route, Server};
use crate::support::{add_clips, audio, plan, settings, start, stores, wait_for, work_dir};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_reply_was_lost_is_kept_and_the_job_researched() {
    let Some((config, session, db)) = stores("researcher-lost-claim").await.into_iter().next()
    else {
        return;
    };
    let server = Server::start().await;
    let audio = audio();
    let (id, wav, _) = &audio.clips[0];
    add_clips(
        &db,
        &[(
            id.clone(),
            server.route(&format!("/clips/{id}.wav"), Route::audio(wav)),
        )],
    )
    .await;
    let url = server.route("/e1.wav", Route::audio(&audio.episode));

    let cut = LostReply::start(archivist_testkit::zk_connect()).await;
    // A long session timeout: the session outlives the reset by far.
    let proxied = ZkConfig {
        connect: cut.addr().to_string(),
        ..config.clone()
    }
    .with_session_timeout(Duration::from_secs(30));
    let work = work_dir("lost-claim");
    let researcher = start(
        &proxied,
        &db,
        settings(&work).with_concurrency(1),
        "researcher-lost-claim",
    );
    assert!(
        eventually(Duration::from_secs(10), || async {
            member::list(&session, paths::RESEARCHERS)
                .await
                .unwrap()
                .iter()
                .any(|m| m.name == "researcher-lost-claim")
        })
        .await,
        "the researcher registers"
    );
    // The next multi the researcher sends is the claim (`pending -> leased`): its reply
    // is lost.
    cut.cut_next_multi();
    let job = plan(&session, "e0000001", &url, std::slice::from_ref(id)).await;
    let done = wait_for(
        &session,
        &job.id,
        &[JobState::Reported, JobState::Failed],
        Duration::from_secs(30),
    )
    .await;
    assert!(!cut.armed(), "the proxy never cut the claim's reply");
    researcher.stop().await;
    assert_eq!(done.status, JobState::Reported, "{done:#?}");
    let claims = done.events.iter().filter(|e| e.step == "claim").count();
    assert_eq!(
        claims, 1,
        "one claim, the one whose reply was lost: {done:#?}"
    );
}
