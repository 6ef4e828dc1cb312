//! Bodies whose length nothing declares (chunked transfer encoding, formats without a
//! length: a tagless CBR MP3, raw ADTS AAC) and compressed bodies (issue 18): a transfer
//! the server broke off is a truncated download, never a shorter episode, even when it
//! stops exactly between two frames; whole gzip bodies (`x-gzip`, several members) are
//! researched.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use archivist_engine::schema::JobState;

use crate::http::{Route, Server};
use crate::support::*;

/// Byte offsets where the frames of an MPEG-1 Layer III stream at 44.1 kHz start
/// (no ID3 tag: ffmpeg's `-id3v2_version 0`).
fn mp3_frames(body: &[u8]) -> Vec<usize> {
    const KBPS: [usize; 15] = [
        0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320,
    ];
    let mut at = 0;
    let mut starts = Vec::new();
    while at + 4 <= body.len() {
        let h = &body[at..at + 4];
        assert!(
            h[0] == 0xff && h[1] & 0xfe == 0xfa && (h[2] >> 2) & 3 == 0,
            "not an MPEG-1 Layer III 44.1 kHz frame at {at}"
        );
        let kbps = KBPS[usize::from(h[2] >> 4)];
        let padding = usize::from((h[2] >> 1) & 1);
        starts.push(at);
        at += 144_000 * kbps / 44_100 + padding;
    }
    starts
}

/// Byte offsets where the frames of a raw ADTS stream start.
fn adts_frames(body: &[u8]) -> Vec<usize> {
    let mut at = 0;
    let mut starts = Vec::new();
    while at + 7 <= body.len() {
        let h = &body[at..at + 7];
        assert!(h[0] == 0xff && h[1] & 0xf6 == 0xf0, "not ADTS at {at}");
        starts.push(at);
        at += (usize::from(h[3] & 3) << 11) | (usize::from(h[4]) << 3) | usize::from(h[5] >> 5);
    }
    starts
}

/// The frame start nearest 60 % of the body: a cut there leaves only whole frames.
fn boundary(starts: &[usize], len: usize) -> usize {
    *starts
        .iter()
        .rev()
        .find(|s| **s <= len * 6 / 10)
        .expect("a frame before 60 %")
}

struct Case {
    path: &'static str,
    route: Route,
    /// Substrings the failure message must contain (None: the job must be reported).
    reason: Option<Vec<&'static str>>,
}

/// A chunked body broken off between two frames of a tagless CBR MP3 or raw ADTS AAC
/// (nothing in the audio can tell it from a whole one) fails as truncated because the
/// transfer never ended (no terminating chunk), and the whole chunked body is
/// researched. A gzip body sent as `x-gzip` or in several members (`cat a.gz b.gz`,
/// valid gzip) is researched; a gzip body broken off is truncated. (Before: the cut
/// MP3 ... )
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_off_transfers_are_truncated_and_whole_compressed_bodies_are_researched() {
    for (config, session, db) in stores("researcher-bodies").await {
        let server = Server::start().await;
        let audio = audio();
        let clip_ids = serve_clips(&db, &server, 2).await;
        let episode = audio.episode.clone();
        let mp3 = Arc::new(ffmpeg_to(
            &episode,
            "mp3",
            &[
                "-ar",
                "44100",
                "-c:a",
                "libmp3lame",
                "-b:a",
                "64k",
                "-write_xing",
                "0",
                "-id3v2_version",
                "0",
            ],
        ));
        let adts = Arc::new(ffmpeg_to(&episode, "adts", &["-c:a", "aac", "-b:a", "64k"]));
        let mp3_cut = boundary(&mp3_frames(&mp3), mp3.len());
        let adts_cut = boundary(&adts_frames(&adts), adts.len());
        let gzip = |bytes: &[u8]| tool(Command::new("gzip").args(["-c", "-n"]), bytes);
        let gzipped = Arc::new(gzip(&episode));
        let half = episode.len() / 2;
        let members = Arc::new([gzip(&episode[..half]), gzip(&episode[half..])].concat());
        let chunked = |body: &Arc<Vec<u8>>, send: usize, end: bool, encoding| Route::Chunked {
            body: body.clone(),
            send,
            end,
            encoding,
        };
        let cases = [
            Case {
                path: "/cut-between-frames.mp3",
                route: chunked(&mp3, mp3_cut, false, None),
                reason: Some(vec!["truncated body", "transfer"]),
            },
            Case {
                path: "/cut-between-frames.aac",
                route: chunked(&adts, adts_cut, false, None),
                reason: Some(vec!["truncated body", "transfer"]),
            },
            Case {
                path: "/whole-chunked.mp3",
                route: chunked(&mp3, mp3.len(), true, None),
                reason: None,
            },
            Case {
                path: "/cut-gzip.wav",
                route: chunked(&gzipped, gzipped.len() / 2, false, Some("gzip")),
                reason: Some(vec!["truncated body"]),
            },
            Case {
                // No length and no chunks: only the gzip trailer can tell, and does.
                path: "/cut-gzip-unframed.wav",
                route: Route::Unframed {
                    body: gzipped.clone(),
                    send: gzipped.len() / 2,
                    encoding: "gzip",
                },
                reason: Some(vec![
                    "truncated body",
                    "the connection closed before the compressed body's end",
                ]),
            },
            Case {
                path: "/x-gzip.wav",
                route: Route::Encoded {
                    body: gzipped.clone(),
                    encoding: "x-gzip",
                },
                reason: None,
            },
            Case {
                path: "/members.wav",
                route: Route::Encoded {
                    body: members,
                    encoding: "gzip",
                },
                reason: None,
            },
            Case {
                path: "/members-chunked.wav",
                route: chunked(&gzipped, gzipped.len(), true, Some("gzip")),
                reason: None,
            },
        ];
        let mut jobs = Vec::new();
        for (i, case) in cases.iter().enumerate() {
            let url = server.route(case.path, case.route.clone());
            jobs.push(plan(&session, &format!("e{:07}", i + 1), &url, &clip_ids).await);
        }
        let work = work_dir("bodies");
        let researcher = start(&config, &db, settings(&work), "researcher-bodies");
        let mut problems = Vec::new();
        for (case, job) in cases.iter().zip(&jobs) {
            let done = wait_for(
                &session,
                &job.id,
                &[JobState::Failed, JobState::Reported],
                Duration::from_secs(60),
            )
            .await;
            let message = done.message.clone().unwrap_or_default();
            eprintln!("{}: {:?} {message}", case.path, done.status);
            match &case.reason {
                None if done.status != JobState::Reported => {
                    problems.push(format!("{}: not researched: {message}", case.path))
                }
                None => {
                    if reports(&session, &job.id).await.len() != 2 {
                        problems.push(format!("{}: not two reports", case.path));
                    }
                }
                Some(_) if done.status != JobState::Failed => problems.push(format!(
                    "{}: researched though the transfer broke off",
                    case.path
                )),
                Some(parts) => {
                    for part in parts {
                        if !message.contains(part) {
                            problems.push(format!("{}: {message:?} lacks {part:?}", case.path));
                        }
                    }
                }
            }
        }
        researcher.stop().await;
        assert!(problems.is_empty(), "{problems:#?}");
    }
}
