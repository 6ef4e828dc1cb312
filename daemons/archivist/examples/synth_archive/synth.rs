//! The synthetic archive's shapes and its writer for a ZooKeeper-only tree (the layout
//! before issue 22: `/catalog/*` and `/research/*`), shared by the `synth_archive`
//! example and the tests of `archivist migrate` (which include this file by path).
//!
//! Shapes (seeded, so two runs write the same archive): episode titles, show notes and
//! media URLs of a podcast; half of the episodes from feeds (a GUID alias besides the URL
//! alias); each researched episode has every clip researched, in runs of 150-450 clips
//! (a researcher's day), 0.5% of its pairs found with 1-3 occurrences, and one episode in
//! 25 has a per-clip error with its clip stamp.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use archivist_catalog::{CatalogItem, FeedGuid, Kind};
use archivist_engine::ops::{self, Mode, Op};
use archivist_engine::schema::clipset::ClipSet;
use archivist_engine::schema::records::{
    clip_stamp, AliasRecord, AliasTarget, CatalogFields, ClipRecord, EpisodeRecord, Occurrence,
    ResearchRecord, ResearchRun,
};
use archivist_engine::schema::{occurrences, paths, SCHEMA_VERSION};
use archivist_engine::{store, Session};
use archivist_recorder::archive;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use time::OffsetDateTime;

/// What to generate.
#[derive(Debug, Clone)]
pub struct Shape {
    /// Episodes in the catalog.
    pub episodes: usize,
    /// Clips in the catalog.
    pub clips: usize,
    /// Fraction of the episodes researched (every clip of each).
    pub researched: f64,
    /// Fraction of the episodes from feeds.
    pub from_feeds: f64,
    /// Seed of the random shapes.
    pub seed: u64,
}

/// The name of the curator the generator writes as.
pub const CURATOR: &str = "synth-curator";

/// Whether episode `i` comes from a feed: a pure function of the seed, so the catalog
/// and the tree writer agree.
pub fn from_feed(shape: &Shape, i: usize) -> bool {
    let mut rng = StdRng::seed_from_u64(shape.seed ^ (i as u64).wrapping_mul(0x9e37_79b9));
    rng.gen_bool(shape.from_feeds.clamp(0.0, 1.0))
}

/// Episode `i` (0-based) as a curator would register it.
pub fn episode_item(shape: &Shape, i: usize) -> Result<CatalogItem> {
    let day = time::Date::from_calendar_date(2010, time::Month::January, 1)?
        + time::Duration::days((i % 5000) as i64);
    let guid = from_feed(shape, i).then(|| FeedGuid {
        feed_url: format!("https://feeds.example/show-{:03}.xml", i % 200),
        guid: format!("urn:uuid:5e1ec7ed-0000-4000-8000-{i:012}"),
    });
    Ok(CatalogItem::new(
        Kind::Episode,
        &format!("https://cdn.example/show-{:03}/{i:06}.mp3", i % 200),
        &format!("Episode {i}: a title of a typical length for a podcast episode"),
        format!("episode {i}"),
    )?
    .with_description(Some(&"Show notes, links and credits. ".repeat(12)))
    .with_media_type(Some("audio/mpeg".into()))
    .with_air_date(Some(day.to_string()))
    .with_priority(Some((i % 5) as i64))
    .with_guid(guid))
}

/// Clip `i` (0-based) as a curator would register it.
pub fn clip_item(i: usize) -> Result<CatalogItem> {
    Ok(CatalogItem::new(
        Kind::Clip,
        &format!("https://clips.example/library/{i:05}.wav"),
        &format!("Clip {i}: a jingle, sponsor read or sting"),
        format!("clip {i}"),
    )?
    .with_media_type(Some("audio/wav".into())))
}

/// The catalog fields a curator stores for a new item (the curators' rule before issue
/// 22, `merge::new_record`).
fn fields(item: &CatalogItem, now: OffsetDateTime) -> CatalogFields {
    CatalogFields {
        title: item.title.clone(),
        description: item.description.clone(),
        media_url: item.media_url.clone(),
        media_type: item.media_type.clone(),
        curator: CURATOR.into(),
        priority: item.priority.unwrap_or(0),
        initial_curated: now,
        last_curated: now,
        content_hash: None,
        duration_s: None,
        guid: item.guid.as_ref().map(|g| g.guid.clone()),
        held: false,
    }
}

/// What was written.
#[derive(Debug, Default, Clone)]
pub struct Written {
    /// The first researched episode.
    pub first: Option<String>,
    /// Research records.
    pub research: u64,
    /// Bytes of research records.
    pub research_bytes: u64,
    /// Researched pairs.
    pub pairs: u64,
    /// Found pairs.
    pub found: u64,
    /// Per-clip errors.
    pub errors: u64,
}

/// Creates nodes, `in_flight` requests at a time (each its own create, pipelined).
struct Creator<'a> {
    session: &'a Session,
    in_flight: usize,
    batch: Vec<Op>,
}

impl Creator<'_> {
    async fn create(&mut self, path: String, data: Vec<u8>) -> Result<()> {
        self.batch.push(Op::Create {
            path,
            data,
            mode: Mode::Persistent,
        });
        if self.batch.len() >= self.in_flight {
            self.flush().await?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<()> {
        let sent: Vec<_> = self
            .batch
            .iter()
            .map(|op| ops::send(self.session, std::slice::from_ref(op)))
            .collect();
        for (op, result) in self.batch.iter().zip(ops::await_all(sent).await) {
            result.with_context(|| format!("writing {}", op.path()))?;
        }
        self.batch.clear();
        Ok(())
    }
}

/// Writes the catalog as nodes, the layout curators wrote before issue 22: every clip
/// and episode record and its aliases (ids numbered from 1 in order). The tree must be
/// initialised and its catalog empty.
pub async fn write_catalog_nodes(
    session: &Session,
    shape: &Shape,
    in_flight: usize,
) -> Result<u64> {
    let now = OffsetDateTime::now_utc();
    let mut creator = Creator {
        session,
        in_flight,
        batch: Vec::new(),
    };
    let mut nodes = 0;
    for i in 0..shape.clips {
        let item = clip_item(i)?;
        let id = paths::clip_id(i as u32 + 1);
        let record = ClipRecord {
            schema: SCHEMA_VERSION,
            id: id.clone(),
            fields: fields(&item, now),
        };
        let path = paths::clip(&id);
        creator
            .create(path.clone(), store::encode(&path, &record)?)
            .await?;
        nodes += 1 + write_aliases(&mut creator, &item, AliasTarget::Clip, &id).await?;
    }
    for i in 0..shape.episodes {
        let item = episode_item(shape, i)?;
        let id = paths::episode_id(i as u64 + 1);
        let record = EpisodeRecord {
            schema: SCHEMA_VERSION,
            id: id.clone(),
            air_date: item.air_date.clone(),
            fields: fields(&item, now),
        };
        let path = paths::episode(&id);
        creator
            .create(path.clone(), store::encode(&path, &record)?)
            .await?;
        nodes += 1 + write_aliases(&mut creator, &item, AliasTarget::Episode, &id).await?;
    }
    creator.flush().await?;
    Ok(nodes)
}

async fn write_aliases(
    creator: &mut Creator<'_>,
    item: &CatalogItem,
    target: AliasTarget,
    id: &str,
) -> Result<u64> {
    let names = item.alias_keys();
    for name in &names {
        let record = AliasRecord {
            schema: SCHEMA_VERSION,
            target,
            id: id.to_string(),
            key: item.alias_key_text(name),
        };
        let path = paths::alias(name);
        creator
            .create(path.clone(), store::encode(&path, &record)?)
            .await?;
    }
    Ok(names.len() as u64)
}

/// Writes the research archive for the catalog in the tree (as the recorder writes a
/// record: one node per researched episode, encoded by the schema's encoder, occurrences
/// compacted by the recorder's own rule).
pub async fn write_research(session: &Session, shape: &Shape, in_flight: usize) -> Result<Written> {
    let clip_ids = store::children(session, paths::CLIPS).await?;
    let mut stamps: BTreeMap<u32, (String, String)> = BTreeMap::new();
    let clip_paths: Vec<String> = clip_ids.iter().map(|id| paths::clip(id)).collect();
    let clips = store::read_many::<ClipRecord>(session, &clip_paths, in_flight.max(1)).await?;
    for ((id, path), read) in clip_ids.iter().zip(&clip_paths).zip(clips) {
        let (record, _) = read.with_context(|| format!("{path} vanished"))?;
        let number = paths::clip_number(id).with_context(|| format!("clip id {id}"))?;
        stamps.insert(number, (id.clone(), clip_stamp(&record.fields)));
    }
    let numbers: Vec<u32> = stamps.keys().copied().collect();
    let episodes = store::children(session, paths::EPISODES).await?;
    let mut rng = StdRng::seed_from_u64(shape.seed);
    let mut creator = Creator {
        session,
        in_flight,
        batch: Vec::new(),
    };
    let mut written = Written::default();
    let mut job = 0u64;
    for episode in &episodes {
        if !rng.gen_bool(shape.researched.clamp(0.0, 1.0)) {
            continue;
        }
        let record = research_record(episode, &numbers, &stamps, &mut rng, &mut job);
        written.pairs += record.researched().len() as u64;
        written.found += record.found.len() as u64;
        written.errors += record.errors.len() as u64;
        let path = paths::research(episode);
        let data = store::encode(&path, &record)?;
        written.research_bytes += data.len() as u64;
        written.research += 1;
        written.first.get_or_insert_with(|| episode.clone());
        creator.create(path, data).await?;
        if written.research % 10_000 == 0 {
            eprintln!("synth_archive: {} research records", written.research);
        }
    }
    creator.flush().await?;
    Ok(written)
}

/// One episode's research record (see the module's shapes).
pub fn research_record(
    episode: &str,
    numbers: &[u32],
    stamps: &BTreeMap<u32, (String, String)>,
    rng: &mut StdRng,
    job: &mut u64,
) -> ResearchRecord {
    let mut record = ResearchRecord::new(episode);
    let duration = rng.gen_range(1200.0..7200.0_f64);
    record.episode_duration_s = Some(occurrences::round_ms(duration));
    let base = OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_400);
    let mut start = 0;
    while start < numbers.len() {
        let end = (start + rng.gen_range(150..=450)).min(numbers.len());
        *job += 1;
        record.runs.push(ResearchRun {
            job: paths::job_id(*job),
            researcher: format!("researcher-{}", rng.gen_range(1..=8)),
            at: base + time::Duration::seconds(rng.gen_range(0..86_400 * 30)),
            clips: numbers[start..end].iter().copied().collect::<ClipSet>(),
        });
        start = end;
    }
    for &n in numbers {
        if !rng.gen_bool(0.005) {
            continue;
        }
        let found: Vec<Occurrence> = (0..rng.gen_range(1..=3))
            .map(|_| Occurrence {
                at: rng.gen_range(0.0..duration - 30.0),
                conf: rng.gen_range(0.55..1.0),
                speed: None,
                part: None,
            })
            .collect();
        if let Some((id, _)) = stamps.get(&n) {
            record.found.insert(id.clone(), archive::compact(&found));
        }
    }
    if rng.gen_bool(0.04) && !numbers.is_empty() {
        let n = numbers[rng.gen_range(0..numbers.len())];
        if let Some((id, stamp)) = stamps.get(&n) {
            if !record.found.contains_key(id) {
                record.errors.insert(
                    id.clone(),
                    "clip audio: decoding failed: no audio track in the file".into(),
                );
                record.error_stamps.insert(id.clone(), stamp.clone());
            }
        }
    }
    record
}

/// Bytes of a child list on the wire: a 4-byte count, then a 4-byte length and the name
/// of each child.
pub fn listing_bytes(names: &[String]) -> usize {
    4 + names.iter().map(|n| 4 + n.len()).sum::<usize>()
}
