//! Plays the planner, researcher and recorder for a submitted batch, so the batch
//! commands can be shown on real data without audio (used for `docs/batches.md`):
//!
//! ```sh
//! archivist --chroot /demo init
//! archivist --chroot /demo batch submit docs/examples/batch.yml
//! archivist --chroot /demo batcher &        # curates it
//! cargo run -p archivist-batches --example batch_demo -- /demo b0000001 fail
//! ```
//!
//! Every pair of the batch is researched through the engine's transitions and the
//! recorder's store (the first clip is "found" in the first episode), except that with
//! `fail` the last episode's job fails with "download failed: HTTP 404". With `retry J`
//! it researches the pairs of job J after `archivist retry J`.

use archivist_engine::jobs::{self, NewJob};
use archivist_engine::schema::paths;
use archivist_engine::schema::records::{BatchRecord, Occurrence, ReportRecord};
use archivist_engine::schema::{JobState, SCHEMA_VERSION};
use archivist_engine::transition::Transition;
use archivist_engine::{store, zk, Session, ZkConfig};
use archivist_recorder::RecorderSettings;

type Error = Box<dyn std::error::Error>;

async fn step(session: &Session, id: &str, to: JobState) -> Result<(), Error> {
    let (job, version) = jobs::read(session, id).await?;
    Transition::new(
        archivist_engine::transition::Role::for_move(
            archivist_engine::transition::machine(),
            job.status,
            to,
        )
        .ok_or("not a move of the table")?,
        &job,
        version,
        to,
    )
    .event("demo", to.as_str(), "ok")
    .commit(session)
    .await?;
    Ok(())
}

async fn research(session: &Session, id: &str, found_clip: Option<&str>) -> Result<(), Error> {
    for to in [JobState::Leased, JobState::Researching, JobState::Reported] {
        step(session, id, to).await?;
    }
    let (job, _) = jobs::read(session, id).await?;
    let mut names = Vec::new();
    for clip in &job.clips {
        let occurrences = if Some(clip.as_str()) == found_clip {
            vec![Occurrence {
                at: 754.312,
                conf: 0.93,
                speed: None,
                part: None,
            }]
        } else {
            vec![]
        };
        let record = ReportRecord {
            schema: SCHEMA_VERSION,
            job: job.id.clone(),
            episode: job.episode.clone(),
            clip: clip.clone(),
            researcher: "demo".into(),
            occurrences,
            error: None,
            clip_stamp: None,
            episode_duration_s: 3600.0,
            clip_duration_s: 4.0,
            researched_at: archivist_engine::clock::stamp_now(),
            is_final: Some(clip) == job.clips.last(),
        };
        let name = paths::report_name(&job.id, clip);
        let path = paths::report(&name);
        let data = store::encode(&path, &record)?;
        session
            .client()
            .create(
                &path,
                &data,
                &session.create_options(zk::CreateMode::Persistent),
            )
            .await?;
        names.push(name);
    }
    // The demo's own research archive, beside its tree.
    let url = format!(
        "sqlite://{}/archivist-batch-demo.db",
        std::env::temp_dir().display()
    );
    let db = archivist_db::Database::connect(&url).await?;
    archivist_recorder::store::store_reports(
        session,
        &db,
        &RecorderSettings::default(),
        id,
        &names,
    )
    .await?;
    step(session, id, JobState::Recorded).await
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [chroot, batch, mode @ ..] = args.as_slice() else {
        return Err("usage: batch_demo CHROOT BATCH [fail | retry JOB]".into());
    };
    let session =
        Session::connect(&ZkConfig::new("127.0.0.1:2181").with_chroot(chroot.clone())).await?;
    if let [m, job] = mode {
        if m == "retry" {
            research(&session, job, None).await?;
            println!("researched {job}");
            return Ok(());
        }
    }
    let fail = mode.first().map(String::as_str) == Some("fail");
    let (record, _) = store::read_required::<BatchRecord>(&session, &paths::batch(batch)).await?;
    for (i, episode) in record.episodes.iter().enumerate() {
        let new = NewJob {
            episode: episode.clone(),
            media_url: format!("http://127.0.0.1:1/{episode}.mp3"),
            clips: record.clips.clone(),
            priority: 0,
            curated_ms: 1_700_000_000_000,
            batch: None,
        };
        let job = jobs::create(&session, &new, "demo", |_| vec![]).await?;
        if fail && i + 1 == record.episodes.len() {
            let (current, version) = jobs::read(&session, &job.id).await?;
            Transition::new(
                archivist_engine::transition::Role::Researcher,
                &current,
                version,
                JobState::Failed,
            )
            .failed()
            .edit(|j| j.message = Some("download failed: HTTP 404".into()))
            .commit(&session)
            .await?;
            println!("{}: failed", job.id);
        } else {
            let found = (i == 0).then(|| record.clips[0].as_str());
            research(&session, &job.id, found).await?;
            println!("{}: recorded", job.id);
        }
    }
    Ok(())
}
