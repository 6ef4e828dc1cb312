//! `archivist match EPISODE CLIP...`: where do these clips occur in this episode? No
//! ZooKeeper: thin glue over `archivist-matcher` (decode, match, render) and the
//! researcher's downloader for URLs. Exits 0 when every clip was matched (found or not),
//! 2 when some clip could not be (its error is in the output).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use archivist_matcher::decode::{decode_file, DecodedAudio};
use archivist_matcher::report::{self, ClipReport, Format, MatchReport};
use archivist_matcher::{MatchConfig, MatchError, Matcher};
use archivist_researcher::clips::relabel;
use archivist_researcher::download::sha256_hex;
use archivist_researcher::{DownloadSettings, Downloader};
use clap::Args;
use tokio_util::sync::CancellationToken;

use crate::cli::{GlobalOpts, OutputFormat};
use crate::cmd::researcher::ModeArg;

/// Arguments of `archivist match`.
#[derive(Debug, Args)]
pub struct MatchArgs {
    /// The episode: a file, or an http(s)/file URL.
    pub episode: String,
    /// The clips to look for: files or URLs.
    #[arg(required = true)]
    pub clips: Vec<String>,
    /// Matching strategy.
    #[arg(long, value_enum, default_value_t = ModeArg::Full, env = "ARCHIVIST_MATCH_MODE")]
    pub mode: ModeArg,
    /// Minimum confidence (whitened NCC) of a whole-clip match; the matcher raises it
    /// per clip to `null_sigmas` standard deviations of the clip's null distribution.
    #[arg(long, env = "ARCHIVIST_MATCH_THRESHOLD", default_value_t = MatchConfig::default().threshold)]
    pub threshold: f32,
    /// Any other matcher setting, as NAME=VALUE (repeatable); the settings and their
    /// defaults are listed below.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// Where URLs are downloaded to (removed afterwards) [default: the system temp dir].
    #[arg(long, env = "ARCHIVIST_MATCH_WORK_DIR")]
    pub work_dir: Option<PathBuf>,
    /// HTTP read timeout, in ms.
    #[arg(
        long,
        env = "ARCHIVIST_MATCH_READ_TIMEOUT_MS",
        default_value_t = 30_000
    )]
    pub read_timeout_ms: u64,
    /// Largest download accepted, in bytes.
    #[arg(long, env = "ARCHIVIST_MATCH_MAX_BYTES", default_value_t = 2 << 30)]
    pub max_bytes: u64,
}

fn is_url(input: &str) -> bool {
    ["http://", "https://", "file://"].iter().any(|p| {
        input
            .get(..p.len())
            .is_some_and(|s| s.eq_ignore_ascii_case(p))
    })
}

/// Local inputs, downloaded where they are URLs; the files to remove afterwards.
struct Inputs {
    dir: PathBuf,
    fetched: Vec<PathBuf>,
    downloader: Downloader,
}

impl Inputs {
    async fn local(&mut self, input: &str) -> Result<PathBuf> {
        if !is_url(input) {
            return Ok(PathBuf::from(input));
        }
        let dest = self.dir.join(format!(
            "archivist-match-{}-{}",
            std::process::id(),
            &sha256_hex(input)[..16]
        ));
        let fetched = self
            .downloader
            .fetch_audio(input, &dest, &CancellationToken::new(), &|_, _| {})
            .await?;
        self.fetched.push(fetched.path.clone());
        Ok(fetched.path)
    }

    fn clean(&self) {
        for f in &self.fetched {
            let _ = std::fs::remove_file(f);
        }
    }
}

async fn decode(
    path: &Path,
    label: &str,
) -> Result<DecodedAudio, archivist_matcher::decode::DecodeError> {
    let path = path.to_path_buf();
    let label = label.to_string();
    tokio::task::spawn_blocking(move || decode_file(&path).map_err(|e| relabel(e, &label)))
        .await
        .unwrap_or_else(|e| {
            Err(archivist_matcher::decode::DecodeError::Io {
                input: "decode task".into(),
                reason: e.to_string(),
            })
        })
}

/// The matcher's settings and their real defaults, for `archivist match --help` (taken
/// from `MatchConfig::default()`, so the help cannot drift from the code).
pub fn settings_help() -> String {
    let defaults = serde_json::to_value(MatchConfig::default()).unwrap_or_default();
    let mut s = String::from(
        "Matcher settings (--set NAME=VALUE; docs/matcher.md says what each one gates) and their defaults:\n",
    );
    if let Some(map) = defaults.as_object() {
        for (name, value) in map {
            if name != "mode" && name != "threshold" {
                // f32 settings print as f32 (0.15, not 0.15000000596046448).
                let shown = match (value.as_u64(), value.as_f64()) {
                    (Some(n), _) => n.to_string(),
                    (None, Some(f)) => format!("{}", f as f32),
                    _ => value.to_string(),
                };
                s.push_str(&format!("  {name} = {shown}\n"));
            }
        }
    }
    s
}

/// Applies `--set NAME=VALUE` settings to `config` (values are JSON scalars) and
/// checks every setting's range.
fn apply_settings(config: MatchConfig, sets: &[String]) -> Result<MatchConfig> {
    let mut value = serde_json::to_value(&config).context("serialising the matcher settings")?;
    let map = value
        .as_object_mut()
        .ok_or_else(|| anyhow!("matcher settings are not an object"))?;
    for set in sets {
        let (name, raw) = set
            .split_once('=')
            .ok_or_else(|| anyhow!("--set {set}: expected NAME=VALUE"))?;
        let name = name.trim();
        if name == "mode" || !map.contains_key(name) {
            bail!("--set {set}: unknown matcher setting {name:?} (see archivist match --help)");
        }
        let parsed: serde_json::Value = serde_json::from_str(raw.trim())
            .with_context(|| format!("--set {set}: {raw:?} is not a number or boolean"))?;
        map.insert(name.to_string(), parsed);
    }
    let config: MatchConfig =
        serde_json::from_value(value).context("--set: a value has the wrong type")?;
    config.validate().context("--set")?;
    Ok(config)
}

/// Runs `archivist match`.
pub async fn run(global: &GlobalOpts, args: MatchArgs) -> Result<ExitCode> {
    let mut config = MatchConfig {
        mode: args.mode.into(),
        threshold: args.threshold,
        ..MatchConfig::default()
    };
    if !(0.0..=1.0).contains(&args.threshold) {
        bail!("--threshold must be within 0..1, not {}", args.threshold);
    }
    config = apply_settings(config, &args.set)?;
    let downloader = Downloader::new(
        DownloadSettings::default()
            .with_read_timeout(Duration::from_millis(args.read_timeout_ms))
            .with_max_bytes(args.max_bytes)
            .with_file_urls(true),
    )?;
    let mut inputs = Inputs {
        dir: args.work_dir.clone().unwrap_or_else(std::env::temp_dir),
        fetched: Vec::new(),
        downloader,
    };
    let outcome = run_inner(&mut inputs, &args, config).await;
    inputs.clean();
    let report = outcome?;
    let text = match global.output {
        OutputFormat::Table => report::render(&report, Format::Table),
        OutputFormat::Json => report::render(&report, Format::Json),
        OutputFormat::Yaml => serde_yaml::to_string(&report).context("rendering YAML")?,
    };
    outln!("{}", text.trim_end());
    let all_ok = report.clips.iter().all(|c| c.result.is_ok());
    Ok(if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

async fn run_inner(
    inputs: &mut Inputs,
    args: &MatchArgs,
    config: MatchConfig,
) -> Result<MatchReport> {
    let started = Instant::now();
    let episode_path = inputs
        .local(&args.episode)
        .await
        .with_context(|| format!("episode {}", args.episode))?;
    let episode = decode(&episode_path, &args.episode)
        .await
        .map_err(|e| anyhow!("episode: {e}"))?;
    let mut clips: Vec<(String, Result<Vec<f32>, MatchError>)> = Vec::new();
    for clip in &args.clips {
        let decoded = match inputs.local(clip).await {
            Ok(path) => decode(&path, clip)
                .await
                .map(|d| d.samples)
                .map_err(|source| MatchError::Decode {
                    clip: clip.clone(),
                    source,
                }),
            Err(e) => Err(MatchError::Decode {
                clip: clip.clone(),
                source: archivist_matcher::decode::DecodeError::Io {
                    input: clip.clone(),
                    reason: e.to_string(),
                },
            }),
        };
        clips.push((clip.clone(), decoded));
    }
    let decode_s = started.elapsed().as_secs_f64();
    let episode_duration_s = episode.duration_s;
    let matching = Instant::now();
    let results = tokio::task::spawn_blocking(move || {
        let matcher = Matcher::from_samples(episode.samples, config);
        let usable: Vec<(String, Vec<f32>)> = clips
            .iter()
            .filter_map(|(label, r)| r.as_ref().ok().map(|s| (label.clone(), s.clone())))
            .collect();
        let mut found = matcher.find_all(&usable).into_iter();
        clips
            .into_iter()
            .map(|(label, r)| ClipReport {
                result: match r {
                    Ok(_) => found.next().unwrap_or_else(|| {
                        Err(MatchError::EmptyClip {
                            clip: label.clone(),
                        })
                    }),
                    Err(e) => Err(e),
                },
                clip: label,
            })
            .collect::<Vec<_>>()
    })
    .await
    .context("match task")?;
    Ok(MatchReport {
        episode: args.episode.clone(),
        episode_duration_s,
        decode_s,
        match_s: matching.elapsed().as_secs_f64(),
        clips: results,
    })
}
