//! A claim whose reply was lost (outside 17i G4): the claim multi applied on the server,
//! the researcher saw a connection reset, dropped the lock and walked away; the job sat
//! in `leased` with nobody working on it until the reaper blamed a "lost" researcher.
//! Now the researcher re-reads the job, finds its claim applied and its lock its own,
//! and goes on. The reply is lost by a loopback proxy in front of the real ZooKeeper.

use std::time::Duration;

use archivist_engine::schema::records::JobRecord;
use archivist_engine::schema::{paths, JobState};
use archivist_engine::{member, ZkConfig};
use archivist_testkit::eventually;
use archivist_testkit::lost_reply::LostReply;

use crate::http::{Route, Server};
use crate::support::{add_clips, audio, plan, settings, start, stores, wait_for, work_dir};

/// Runs one job of one clip through a researcher whose ZooKeeper connection goes
/// through a [`LostReply`] proxy that `arm` sets up before the job is planned; returns
/// the job once reported or failed, and whether the proxy's cut happened.
async fn research_through_cut(
    name: &str,
    arm: impl FnOnce(&LostReply),
) -> Option<(JobRecord, bool)> {
    let (config, session, db) = stores(name).await.into_iter().next()?;
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
    let work = work_dir(name);
    let researcher = start(&proxied, &db, settings(&work).with_concurrency(1), name);
    assert!(
        eventually(Duration::from_secs(10), || async {
            member::list(&session, paths::RESEARCHERS)
                .await
                .unwrap()
                .iter()
                .any(|m| m.name == name)
        })
        .await,
        "the researcher registers"
    );
    arm(&cut);
    let job = plan(&session, "e0000001", &url, std::slice::from_ref(id)).await;
    let done = wait_for(
        &session,
        &job.id,
        &[JobState::Reported, JobState::Failed, JobState::Expired],
        Duration::from_secs(40),
    )
    .await;
    researcher.stop().await;
    Some((done, !cut.armed()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_reply_was_lost_is_kept_and_the_job_researched() {
    // The next multi the researcher sends is the claim (`pending -> leased`): its reply
    // is lost.
    let Some((done, cut)) =
        research_through_cut("researcher-lost-claim", |cut| cut.cut_next_multi()).await
    else {
        return;
    };
    assert!(cut, "the proxy never cut the claim's reply");
    assert_eq!(done.status, JobState::Reported, "{done:#?}");
    let claims = done.events.iter().filter(|e| e.step == "claim").count();
    assert_eq!(
        claims, 1,
        "one claim, the one whose reply was lost: {done:#?}"
    );
}

/// Outside 17m M3: the reply to the researcher's own `leased -> researching` move was
/// lost, and so was the reply to its first look at the job afterwards (the connection
/// was still coming back, as after a leader change). The move was sent again, its
/// version check failed on the move that had applied, and the researcher read that as
/// "the job moved meanwhile": it walked away from its job, and the reaper expired it
/// blaming a lost session. Now the look is made again until it is answered, the job's
/// history says the move applied, and the researcher goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transition_whose_reply_and_next_read_were_lost_is_kept() {
    // Multi 1 is the claim; multi 2 the move to `researching`; opcode 4 is getData.
    let Some((done, cut)) = research_through_cut("researcher-lost-move", |cut| {
        cut.slow_reconnect(Duration::from_millis(700));
        cut.cut_multi_after_then(1, 4);
    })
    .await
    else {
        return;
    };
    assert!(cut, "the proxy never cut the move's reply");
    assert_eq!(done.status, JobState::Reported, "{done:#?}");
    for step in ["claim", "media decoded"] {
        let n = done.events.iter().filter(|e| e.step == step).count();
        assert!(
            n <= 1,
            "{n} {step} events (the move was made twice?): {done:#?}"
        );
    }
    assert!(
        done.events.iter().all(|e| e.step != "reap"),
        "the reaper never had to take the job back: {done:#?}"
    );
}
