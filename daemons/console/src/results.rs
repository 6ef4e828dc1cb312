//! The results pages: an episode (`GET /episodes/{id}`: its timeline, a player that
//! plays from a mark, and its rows) over [`archivist_admin::results::episode_results`],
//! and a clip (`GET /clips/{id}`: every episode where it occurs) over
//! [`archivist_admin::results::clip_results`], the functions behind `results`.

use archivist_admin::results::{self, ResultRow};
use archivist_admin::Silent;
use axum::extract::{Path, State};
use maud::{html, Markup};

use crate::error::PageError;
use crate::layout::{self, clip_link, clock, episode_link, job_link};
use crate::timeline;
use crate::Console;

fn conf(r: &ResultRow) -> String {
    r.conf.map(|c| format!("{c:.2}")).unwrap_or_default()
}

fn how(r: &ResultRow) -> Markup {
    html! {
        @if let Some(s) = r.speed { "speed ×" (format!("{s:.2}")) " " }
        @if let (Some(a), Some(b)) = (r.part_start, r.part_end) { "part " (format!("{a:.1}–{b:.1} s")) }
    }
}

/// `GET /episodes/{id}`.
pub async fn episode_page(
    State(console): State<Console>,
    Path(id): Path<String>,
) -> Result<Markup, PageError> {
    PageError::check_id("episode", &id)?;
    let res = results::episode_results(console.db(), &id).await?;
    let url = archivist_db::catalog::episode(console.db(), &id)
        .await?
        .map(|e| e.fields.media_url)
        .unwrap_or_default();
    let found: Vec<&ResultRow> = res.rows.iter().filter(|r| r.found).collect();
    let missing: Vec<&ResultRow> = res
        .rows
        .iter()
        .filter(|r| !r.found && r.error.is_none())
        .collect();
    let errors: Vec<&ResultRow> = res.rows.iter().filter(|r| r.error.is_some()).collect();
    // What the player plays is what the host serves now: marks measured on any other
    // rendition may not match it, a re-upload's or a moved pin's alike (outside 23b M5,
    // 23c N2: after the pin moved, the old marks played on the new audio unwarned).
    let served_now = res
        .renditions
        .iter()
        .find(|r| r.served_last)
        .map(|r| archivist_admin::results::rendition_prefix(&r.sha256));
    let on_other_audio: Vec<&&ResultRow> = found
        .iter()
        .filter(|r| matches!((&r.rendition, &served_now), (Some(a), Some(now)) if a != now))
        .collect();
    let mut others: Vec<&str> = on_other_audio
        .iter()
        .filter_map(|r| r.rendition.as_deref())
        .collect();
    others.sort_unstable();
    others.dedup();
    Ok(layout::page(
        &res.title,
        console.settings().refresh_s,
        html! {
            h1 { (res.title) }
            p.muted { "Episode " (res.episode)
                @if let Some(d) = res.duration_s { ", " (clock(d)) " long" }
                " · results: " (crate::export::links("episodes", &res.episode)) }
            @let playable = timeline::playable(&url);
            audio #player controls preload="metadata" src=[playable] data-src=[timeline::media_base(&url)] {}
            @if let Some(now) = served_now.as_deref() {
                @if !on_other_audio.is_empty() {
                    p.error #other-audio { (on_other_audio.len()) " of the " (found.len()) " marks were measured on audio the episode's host no longer serves (rendition "
                        @for (i, r) in others.iter().enumerate() { @if i > 0 { ", " } code { (r) } }
                        "); when last asked it served rendition " code { (now) } ". The player plays what the host serves now, so those marks may not match what you hear (the Audio column says which)." }
                }
            }
            @if playable.is_none() {
                p.error #unplayable { "The episode's media URL is not an http or https URL, so it is not played or linked: " code { (url) } }
            }
            div #episode-results data-live {
                p { (res.found) " of " (res.researched) " researched clips found"
                    @if res.researched_not_in_catalog > 0 { " (" (res.researched_not_in_catalog) " researched clips are no longer in the catalog)" } "." }
                (timeline::svg(&res.rows, res.duration_s, &url))
                p.muted { "Shade: confidence. Orange with a triangle: speed changed. Hollow: part of the clip. Click a mark to play from it." }
                @if !found.is_empty() {
                    h2 { "Occurrences" }
                    table #occurrences {
                        tr { th { "At" } th { "Clip" } th { "Title" } th.num { "Confidence" } th { "Match" } th { "Audio" } th { "Job" } th {} }
                        @for r in &found {
                            @let at = r.at.unwrap_or(0.0);
                            tr {
                                td.num { (clock(at)) } td { (clip_link(&r.clip)) } td { (r.clip_title) }
                                td.num { (conf(r)) } td { (how(r)) }
                                td { @if let Some(a) = &r.rendition { code { (a) } @if served_now.as_deref().is_some_and(|n| n != a) { " (not served now)" } } }
                                td { @if let Some(j) = &r.job { (job_link(j)) } }
                                td { @if let Some(href) = timeline::media_at(&url, at) {
                                    a.play href=(href) data-t=(timeline::fragment_seconds(at)) { "▶ play" } } }
                            }
                        }
                    }
                }
                @if !missing.is_empty() {
                    h2 { "Researched, not found" }
                    p #not-found { @for r in &missing { (clip_link(&r.clip)) " " } }
                }
                @if !errors.is_empty() {
                    h2 { "Errors" }
                    table #errors {
                        tr { th { "Clip" } th { "Error" } }
                        @for r in &errors { tr { td { (clip_link(&r.clip)) } td.error { (r.error.as_deref().unwrap_or("")) } } }
                    }
                }
                @if !res.renditions.is_empty() {
                    h2 { "Renditions" }
                    table #renditions {
                        tr { th { "sha256" } th.num { "Bytes" } th { "URL" } th { "Pinned" } th { "Served last" } th { "Jobs" } }
                        @for r in &res.renditions {
                            tr { td { code { (r.sha256.get(..12).unwrap_or(&r.sha256)) } } td.num { (r.bytes) } td { (r.url) }
                                 td { @if r.pinned { "pinned" } } td { @if r.served_last { "yes" } }
                                 td { @for j in &r.jobs { (job_link(j)) " " } } }
                        }
                    }
                }
            }
            script src=(crate::assets::PLAYER_PATH) {}
        },
    ))
}

/// `GET /clips/{id}`.
pub async fn clip_page(
    State(console): State<Console>,
    Path(id): Path<String>,
) -> Result<Markup, PageError> {
    PageError::check_id("clip", &id)?;
    let res = results::clip_results(console.db(), console.admin(), &id, &Silent).await?;
    Ok(layout::page(
        &res.title,
        console.settings().refresh_s,
        html! {
            h1 { (res.title) }
            p.muted { "Clip " (res.clip) " · results: " (crate::export::links("clips", &res.clip)) }
            div #clip-results data-live {
                p { "Found in " (res.episodes_found) " of " (res.episodes_researched) " episodes researched"
                    @if res.episodes_errored > 0 { "; research failed in " (res.episodes_errored) } "." }
                @let found: Vec<&ResultRow> = res.rows.iter().filter(|r| r.found).collect();
                @if !found.is_empty() {
                    table #occurrences {
                        tr { th { "Episode" } th { "Title" } th.num { "At" } th.num { "Confidence" } th { "Match" } }
                        @for r in &found {
                            tr.occurrence data-episode=(r.episode) {
                                td { (episode_link(&r.episode)) } td { (r.episode_title) }
                                td.num { (clock(r.at.unwrap_or(0.0))) } td.num { (conf(r)) } td { (how(r)) }
                            }
                        }
                    }
                }
                @let errors: Vec<&ResultRow> = res.rows.iter().filter(|r| r.error.is_some()).collect();
                @if !errors.is_empty() {
                    h2 { "Errors" }
                    table #errors {
                        tr { th { "Episode" } th { "Error" } }
                        @for r in &errors { tr { td { (episode_link(&r.episode)) } td.error { (r.error.as_deref().unwrap_or("")) } } }
                    }
                }
            }
        },
    ))
}
