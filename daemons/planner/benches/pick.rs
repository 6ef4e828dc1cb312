//! Pick latency and memory of the planner's index at 1k x 200 and 10k x 2k (20M pairs),
//! next to a naive baseline (a scan over every pair), plus a full index load from a real
//! ZooKeeper tree for the 1k x 200 case.
//!
//! `cargo bench -p archivist-planner --bench pick` (set `PICK_BENCH_NO_ZK=1` to skip the
//! ZooKeeper part). Targets: <= 50 ms per pick, <= 200 MB.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use archivist_planner::index::{ClipInfo, EpisodeInfo, Index};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const MB: f64 = 1024.0 * 1024.0;
const BASE_MS: i64 = 1_700_000_000_000;
const MAX_CLIPS: usize = 50;

fn rss_mb(field: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with(field)).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<f64>().ok())
            })
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

/// One generated catalog and research state (what the tree would hold).
struct World {
    episodes: Vec<(String, EpisodeInfo)>,
    clips: Vec<(u32, ClipInfo)>,
    /// Per episode: fully researched, or the researched fraction.
    research: Vec<f64>,
    seed: u64,
}

fn world(episodes: usize, clips: u32, complete: f64) -> World {
    let mut rng = StdRng::seed_from_u64(7);
    let episodes = (1..=episodes)
        .map(|n| {
            (
                format!("e{n:07}"),
                EpisodeInfo {
                    priority: rng.gen_range(0..5),
                    curated_ms: BASE_MS + rng.gen_range(0..400 * 86_400_000i64),
                    held: rng.gen_bool(0.01),
                    media_url: format!("https://media.example.org/tbtl/episode-{n}.mp3"),
                },
            )
        })
        .collect::<Vec<_>>();
    let clips = (1..=clips)
        .map(|n| {
            (
                n,
                ClipInfo {
                    id: format!("c{n:06}"),
                    priority: rng.gen_range(0..3),
                    curated_ms: BASE_MS + rng.gen_range(0..400 * 86_400_000i64),
                    held: rng.gen_bool(0.01),
                },
            )
        })
        .collect::<Vec<_>>();
    let research = (0..episodes.len())
        .map(|_| {
            if rng.gen_bool(complete) {
                1.0
            } else {
                rng.gen_range(0.0..0.9)
            }
        })
        .collect();
    World {
        episodes,
        clips,
        research,
        seed: 11,
    }
}

/// The researched clip numbers of episode `i` (generated on demand, as records are read
/// one at a time, so the generator does not hold 20M pairs).
fn researched(world: &World, i: usize) -> impl Iterator<Item = u32> + '_ {
    let fraction = world.research[i];
    let mut rng = StdRng::seed_from_u64(world.seed ^ i as u64);
    world
        .clips
        .iter()
        .map(|(n, _)| *n)
        .filter(move |_| fraction >= 1.0 || rng.gen_bool(fraction))
}

fn build(world: &World) -> Index {
    let mut index = Index::new();
    for (n, c) in &world.clips {
        index.upsert_clip(*n, c.clone());
    }
    for (i, (id, info)) in world.episodes.iter().enumerate() {
        index.upsert_episode(id, info.clone());
        index.set_research(id, researched(world, i));
    }
    index
}

struct Figures {
    mean: Duration,
    p50: Duration,
    max: Duration,
    picks: usize,
}

fn figures(mut times: Vec<Duration>) -> Figures {
    times.sort();
    let picks = times.len();
    let sum: Duration = times.iter().sum();
    Figures {
        mean: sum / picks.max(1) as u32,
        p50: times.get(picks / 2).copied().unwrap_or_default(),
        max: times.last().copied().unwrap_or_default(),
        picks,
    }
}

/// Picks as the planner does: each pick is leased at once (so the next moves on).
fn bench_index(index: &mut Index, picks: usize) -> Figures {
    let now = BASE_MS + 1_000;
    let mut times = Vec::with_capacity(picks);
    for k in 0..picks {
        let t = Instant::now();
        let pick = index.pick(now, MAX_CLIPS);
        times.push(t.elapsed());
        let Some(pick) = pick else { break };
        index.upsert_lease(
            &format!("j{k:010}"),
            &pick.episode,
            pick.clip_numbers,
            now + 600_000,
        );
    }
    figures(times)
}

/// The naive planner: per pick, sort the episodes, then for each one scan every clip
/// against a set of researched pairs and the list of leases.
struct Naive {
    episodes: Vec<(String, EpisodeInfo)>,
    clips: Vec<(u32, ClipInfo)>,
    researched: Vec<HashSet<u32>>,
    leases: Vec<(String, Vec<u32>, i64)>,
}

impl Naive {
    fn new(world: &World) -> Naive {
        Naive {
            episodes: world.episodes.clone(),
            clips: world.clips.clone(),
            researched: (0..world.episodes.len())
                .map(|i| researched(world, i).collect())
                .collect(),
            leases: Vec::new(),
        }
    }

    fn pick(&self, now: i64) -> Option<(String, Vec<u32>)> {
        let mut order: Vec<usize> = (0..self.episodes.len()).collect();
        order.sort_by(|a, b| {
            let (ea, eb) = (&self.episodes[*a].1, &self.episodes[*b].1);
            (eb.priority, eb.curated_ms).cmp(&(ea.priority, ea.curated_ms))
        });
        let mut clips: Vec<&(u32, ClipInfo)> = self.clips.iter().filter(|(_, c)| !c.held).collect();
        clips.sort_by_key(|(_, c)| std::cmp::Reverse((c.priority, c.curated_ms)));
        for i in order {
            let (id, info) = &self.episodes[i];
            if info.held {
                continue;
            }
            let free: Vec<u32> = clips
                .iter()
                .map(|(n, _)| *n)
                .filter(|n| !self.researched[i].contains(n))
                .filter(|n| {
                    !self
                        .leases
                        .iter()
                        .any(|(e, c, exp)| e == id && *exp > now && c.contains(n))
                })
                .take(MAX_CLIPS)
                .collect();
            if !free.is_empty() {
                return Some((id.clone(), free));
            }
        }
        None
    }
}

fn bench_naive(naive: &mut Naive, picks: usize) -> Figures {
    let now = BASE_MS + 1_000;
    let mut times = Vec::with_capacity(picks);
    for _ in 0..picks {
        let t = Instant::now();
        let pick = naive.pick(now);
        times.push(t.elapsed());
        let Some((episode, clips)) = pick else { break };
        naive.leases.push((episode, clips, now + 600_000));
    }
    figures(times)
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

fn row(case: &str, what: &str, f: &Figures, mem: &str) {
    println!(
        "{case:<14} {what:<34} {:>6} {:>10} {:>10} {:>10} {mem:>22}",
        f.picks,
        ms(f.mean),
        ms(f.p50),
        ms(f.max)
    );
}

fn run_case(name: &str, episodes: usize, clips: u32, naive_picks: usize) {
    let world = world(episodes, clips, 0.9);
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let t = Instant::now();
    let mut index = build(&world);
    let built = t.elapsed();
    let index_bytes = LIVE.load(Ordering::Relaxed).saturating_sub(before);
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(before);
    let stats = index.stats();
    let f = bench_index(&mut index, 200);
    row(
        name,
        "index pick (90% complete)",
        &f,
        &format!("{:.1} MB heap", index_bytes as f64 / MB),
    );
    println!(
        "{:<14} {:<34} built in {} ms, peak {:.1} MB while building, estimate {:.1} MB, RSS now {:.1} MB",
        "",
        format!("  {} plannable episodes", stats.plannable_episodes),
        ms(built),
        peak as f64 / MB,
        stats.heap_bytes as f64 / MB,
        rss_mb("VmRSS:")
    );
    // A clip catalog change makes the next pick recount every episode.
    let mut times = Vec::new();
    for (k, (n, c)) in world.clips.iter().take(10).enumerate() {
        index.upsert_clip(
            *n,
            ClipInfo {
                priority: c.priority + 1,
                ..c.clone()
            },
        );
        let t = Instant::now();
        let pick = index.pick(BASE_MS + 1_000, MAX_CLIPS);
        times.push(t.elapsed());
        if let Some(p) = pick {
            index.upsert_lease(
                &format!("jc{k:09}"),
                &p.episode,
                p.clip_numbers,
                BASE_MS + 600_000,
            );
        }
    }
    row(
        name,
        "clip change, then pick (recount)",
        &figures(times),
        "",
    );
    // Worst case: only the last episode in order has work left.
    let mut worst = Index::new();
    for (n, c) in &world.clips {
        worst.upsert_clip(*n, c.clone());
    }
    let all: Vec<u32> = world.clips.iter().map(|(n, _)| *n).collect();
    for (id, info) in &world.episodes {
        let info = EpisodeInfo {
            held: false,
            ..info.clone()
        };
        worst.upsert_episode(id, info);
        worst.set_research(id, all.iter().copied());
    }
    let last = world
        .episodes
        .iter()
        .min_by_key(|(id, i)| (i.priority, i.curated_ms, std::cmp::Reverse(id.clone())))
        .map(|(id, _)| id.clone())
        .unwrap_or_default();
    worst.set_research(&last, all.iter().copied().skip(1));
    let f = bench_index(&mut worst, 2);
    row(name, "index pick (worst: last episode)", &f, "");
    drop(worst);
    {
        let mut naive_worst = Naive {
            episodes: world
                .episodes
                .iter()
                .map(|(id, i)| {
                    (
                        id.clone(),
                        EpisodeInfo {
                            held: false,
                            ..i.clone()
                        },
                    )
                })
                .collect(),
            clips: world.clips.clone(),
            researched: world
                .episodes
                .iter()
                .map(|(id, _)| all.iter().copied().skip(usize::from(*id == last)).collect())
                .collect(),
            leases: Vec::new(),
        };
        let f = bench_naive(&mut naive_worst, 2);
        row(name, "naive scan (worst: last episode)", &f, "");
    }
    let mut naive = Naive::new(&world);
    let naive_bytes = LIVE
        .load(Ordering::Relaxed)
        .saturating_sub(before + index_bytes);
    let f = bench_naive(&mut naive, naive_picks);
    row(
        name,
        "naive scan over all pairs",
        &f,
        &format!("{:.1} MB heap", naive_bytes as f64 / MB),
    );
}

async fn zk_load(episodes: usize, clips: u32) -> Result<(), String> {
    use archivist_db::catalog::CatalogRecord;
    use archivist_engine::schema::records::{
        CatalogFields, ClipRecord, EpisodeRecord, ResearchRecord, ResearchRun,
    };
    use archivist_engine::schema::{paths, SCHEMA_VERSION};
    use archivist_engine::{ops, store, zk, Session, ZkConfig};
    let config = ZkConfig::new(archivist_testkit::zk_connect())
        .with_chroot(format!("/bench/pick-{}", std::process::id()));
    let session = Session::connect(&config).await.map_err(|e| e.to_string())?;
    archivist_engine::tree::init(&session, "bench")
        .await
        .map_err(|e| e.to_string())?;
    let world = world(episodes, clips, 0.9);
    let db =
        archivist_testkit::db::fresh_database(archivist_testkit::db::Backend::Sqlite, "bench-pick")
            .await;
    let mut records = Vec::new();
    let fields = |title: &str, priority: i64, curated_ms: i64, held: bool| CatalogFields {
        title: title.to_string(),
        description: None,
        media_url: format!("https://media.example.org/{title}.mp3"),
        media_type: None,
        curator: "bench".into(),
        priority,
        initial_curated: archivist_engine::clock::to_datetime(curated_ms),
        last_curated: archivist_engine::clock::to_datetime(curated_ms),
        content_hash: None,
        duration_s: None,
        guid: None,
        held,
    };
    let mut nodes: Vec<(String, Vec<u8>)> = Vec::new();
    let mut research_records: Vec<ResearchRecord> = Vec::new();
    let mut holds: Vec<String> = Vec::new();
    for (_, c) in &world.clips {
        records.push(CatalogRecord::Clip(ClipRecord {
            schema: SCHEMA_VERSION,
            id: c.id.clone(),
            fields: fields(&c.id, c.priority, c.curated_ms, c.held),
        }));
        if c.held {
            holds.push(paths::hold(&c.id));
        }
    }
    for (i, (id, e)) in world.episodes.iter().enumerate() {
        records.push(CatalogRecord::Episode(EpisodeRecord {
            schema: SCHEMA_VERSION,
            id: id.clone(),
            air_date: None,
            fields: fields(id, e.priority, e.curated_ms, e.held),
        }));
        if e.held {
            holds.push(paths::hold(id));
        }
        let mut research = ResearchRecord::new(id);
        research.runs.push(ResearchRun {
            job: "j0000000001".into(),
            researcher: "bench".into(),
            at: archivist_engine::clock::to_datetime(BASE_MS),
            clips: researched(&world, i).collect(),
        });
        research_records.push(research);
    }
    let t = Instant::now();
    for chunk in records.chunks(5_000) {
        archivist_db::catalog::put(&db, chunk)
            .await
            .map_err(|e| e.to_string())?;
    }
    for chunk in research_records.chunks(2_000) {
        archivist_db::migrate::insert_research(&db, chunk)
            .await
            .map_err(|e| e.to_string())?;
    }
    nodes.extend(holds.into_iter().map(|h| (h, Vec::new())));
    let options = session.create_options(zk::CreateMode::Persistent);
    for chunk in nodes.chunks(500) {
        let futures: Vec<_> = chunk
            .iter()
            .map(|(p, d)| session.client().create(p, d, &options))
            .collect();
        for r in ops::await_all(futures).await {
            r.map_err(|e| e.to_string())?;
        }
    }
    let written = t.elapsed();
    let t = Instant::now();
    let ttl_ms = archivist_planner::PlannerSettings::default().work_item_ttl_ms();
    let index = archivist_planner::load::load(&session, &db, ttl_ms)
        .await
        .map_err(|e| e.to_string())?
        .index;
    let loaded = t.elapsed();
    let stats = index.stats();
    let t = Instant::now();
    let started = archivist_planner::Planner::start(
        &session,
        &db,
        archivist_planner::PlannerSettings::default(),
        "bench",
    )
    .await
    .map_err(|e| e.to_string())?;
    let start = t.elapsed();
    let mut planner = started;
    let mut times = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let pick = planner.pick().await.map_err(|e| e.to_string())?;
        times.push(t.elapsed());
        if pick.is_none() {
            break;
        }
    }
    let f = figures(times);
    println!(
        "{:<14} {:<34} {} nodes written in {} ms; load {} ms ({} episodes, {} clips); Planner::start (watches + load) {} ms",
        format!("{episodes} x {clips}"),
        "full load from real ZooKeeper",
        nodes.len(),
        ms(written),
        ms(loaded),
        stats.episodes,
        stats.active_clips,
        ms(start)
    );
    row(
        &format!("{episodes} x {clips}"),
        "Planner::pick (/clock write + pick)",
        &f,
        "",
    );
    // A round creating 50 work items (job + queue entry + lease, one multi each).
    let member = archivist_engine::schema::records::MemberRecord {
        schema: SCHEMA_VERSION,
        role: "researcher".into(),
        name: "bench".into(),
        slots: 49,
        version: "bench".into(),
        host: "bench".into(),
        pid: std::process::id(),
        metrics: None,
        started: archivist_engine::clock::to_datetime(BASE_MS),
        work_item_ttl_ms: None,
    };
    let path = paths::researcher("bench");
    let data = store::encode(&path, &member).map_err(|e| e.to_string())?;
    ops::commit(
        &session,
        &[ops::Op::Create {
            path,
            data,
            mode: ops::Mode::Ephemeral,
        }],
    )
    .await
    .map_err(|e| e.to_string())?;
    let t = Instant::now();
    let report = planner
        .round(&tokio_util::sync::CancellationToken::new())
        .await
        .map_err(|e| e.to_string())?;
    let took = t.elapsed();
    println!(
        "{:<14} {:<34} {} items in {} ms ({} ms per item, stop: {:?})",
        format!("{episodes} x {clips}"),
        "Planner::round (pick + create)",
        report.created.len(),
        ms(took),
        ms(took / report.created.len().max(1) as u32),
        report.stop
    );
    Ok(())
}

fn main() {
    println!(
        "{:<14} {:<34} {:>6} {:>10} {:>10} {:>10} {:>22}",
        "case", "what", "picks", "mean ms", "p50 ms", "max ms", "memory"
    );
    run_case("1k x 200", 1_000, 200, 50);
    run_case("10k x 2k", 10_000, 2_000, 5);
    println!(
        "peak RSS of this process: {:.1} MB (includes the generator and the naive baseline)",
        rss_mb("VmHWM:")
    );
    if std::env::var_os("PICK_BENCH_NO_ZK").is_none() {
        let runtime = match tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("no runtime: {e}");
                return;
            }
        };
        if let Err(e) = runtime.block_on(zk_load(1_000, 200)) {
            eprintln!("ZooKeeper load skipped: {e}");
        }
    }
}
