//! Deterministic, seeded test-corpus generator: synthetic speech and music
//! beds, clips of several kinds, placements (spliced or mixed over) with
//! degradations, rendered in memory or written to a directory with a JSON
//! truth file. Everything is synthesised here; the only external tools used
//! are Debian's `lame` (MP3 encoding; skipped with a note if missing) and,
//! optionally, `espeak-ng` for spoken drops.
//!
//! ```no_run
//! use archivist_testaudio::{BedKind, ClipKind, Placement, Scenario};
//! let mut s = Scenario::new(42, 120.0, BedKind::Speech);
//! let drop = s.add_clip("drop", ClipKind::SpokenDrop, 2.0);
//! s.place(drop, 10.0, Placement::Splice).place(drop, 70.0, Placement::Mix { clip_db: -3.0 });
//! let truth = s.write_to(std::path::Path::new("/tmp/corpus")).unwrap();
//! assert_eq!(truth.occurrences.len(), 2);
//! ```
//!
//! A crate of its own (not a module of the matcher) so the production matcher and the
//! daemons built on it do not ship the generator; the matcher's tests, benches and
//! examples, the researcher's tests and `archivist sample` use it.
#![deny(missing_docs)]

use std::f64::consts::PI;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use archivist_matcher::dsp::{self, Rng};

pub mod degrade;

/// Kind of background bed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BedKind {
    /// Formant-synthesised speech-like babble (phrases and pauses).
    Speech,
    /// Chords, bass and drums.
    Music,
    /// Alternating speech and music sections (30-90 s each).
    Mixed,
    /// Digital silence.
    Silence,
}

/// Kind of clip.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClipKind {
    /// A spoken phrase (formant synthesis of a distinct voice).
    SpokenDrop,
    /// A short tonal sting (~1 s): a few partials with a bright attack.
    Sting,
    /// A jingle (3-8 s): melody, chords and drums.
    Jingle,
    /// A long theme (15-30 s): music with a structure of its own.
    Theme,
}

/// How a clip is put into the episode.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// Replaces the bed (5 ms crossfades at both ends).
    Splice,
    /// Added over the bed; `clip_db` is the clip level relative to the bed's RMS.
    Mix {
        /// Clip RMS relative to bed RMS (dB).
        clip_db: f32,
    },
}

/// Degradations applied to one placed copy of a clip (in this order:
/// truncation, speed, tempo, gain, noise).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Degrade {
    /// Use only the part [start, end) of the clip, as fractions of its length.
    pub part: (f64, f64),
    /// Speed factor (resampling: pitch changes). 1.0 = unchanged.
    pub speed: f64,
    /// Tempo factor (WSOLA: pitch kept). 1.0 = unchanged.
    pub tempo: f64,
    /// Gain (dB).
    pub gain_db: f32,
    /// White noise added to the clip at this SNR (dB), if any.
    pub noise_snr_db: Option<f32>,
}

impl Default for Degrade {
    fn default() -> Self {
        Self {
            part: (0.0, 1.0),
            speed: 1.0,
            tempo: 1.0,
            gain_db: 0.0,
            noise_snr_db: None,
        }
    }
}

/// A clip definition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClipSpec {
    /// Clip name (file stem).
    pub name: String,
    /// Kind.
    pub kind: ClipKind,
    /// Duration (s).
    pub duration_s: f64,
    /// Synthesis seed.
    pub seed: u64,
}

/// One placement of a clip.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Placed {
    /// Index into the scenario's clips.
    pub clip: usize,
    /// Episode time (s) where the (possibly truncated) clip starts.
    pub offset_s: f64,
    /// Splice or mix.
    pub placement: Placement,
    /// Degradations.
    pub degrade: Degrade,
}

/// A scenario: bed, clips, placements and episode-level degradations.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    /// Master seed.
    pub seed: u64,
    /// Sample rate of the rendered audio (Hz).
    pub rate: u32,
    /// Episode duration (s).
    pub duration_s: f64,
    /// Bed kind.
    pub bed: BedKind,
    /// Clip definitions.
    pub clips: Vec<ClipSpec>,
    /// Placements.
    pub placements: Vec<Placed>,
    /// White noise added to the whole episode at this SNR (dB), if any.
    pub episode_noise_snr_db: Option<f32>,
    /// Gain applied to the whole episode (dB).
    pub episode_gain_db: f32,
    /// Write the episode as MP3 at this bit rate (kbps, mono) via `lame`,
    /// instead of WAV (falls back to WAV with a note if `lame` is missing).
    pub episode_mp3_kbps: Option<u32>,
    /// Use `espeak-ng` for spoken drops when it is installed (default false:
    /// formant synthesis, identical on every machine).
    pub use_espeak: bool,
}

/// Where each clip really is (written as `truth.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Truth {
    /// Episode file name (relative to the directory).
    pub episode: String,
    /// Episode duration (s).
    pub duration_s: f64,
    /// Clip files.
    pub clips: Vec<TruthClip>,
    /// Every placed occurrence.
    pub occurrences: Vec<TruthOccurrence>,
    /// Notes (e.g. a skipped MP3 variant).
    pub notes: Vec<String>,
}

/// A clip file in the truth.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TruthClip {
    /// Clip name.
    pub name: String,
    /// File name relative to the directory.
    pub file: String,
    /// Kind.
    pub kind: ClipKind,
    /// Duration (s).
    pub duration_s: f64,
}

/// A placed occurrence in the truth.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TruthOccurrence {
    /// Clip name.
    pub clip: String,
    /// Episode time (s) where the used part of the clip starts.
    pub offset_s: f64,
    /// Speed x tempo factor.
    pub speed: f64,
    /// Used part of the clip: start (s, clip time).
    pub clip_start_s: f64,
    /// Used part of the clip: end (s, clip time).
    pub clip_end_s: f64,
    /// Splice or mix.
    pub placement: Placement,
    /// Degradations.
    pub degrade: Degrade,
}

/// Rendered audio (at the scenario rate) plus truth.
#[derive(Clone, Debug)]
pub struct Rendered {
    /// Episode samples.
    pub episode: Vec<f32>,
    /// (name, samples) of each clip.
    pub clips: Vec<(String, Vec<f32>)>,
    /// Truth (file names as `write_to` would use).
    pub truth: Truth,
}

impl Scenario {
    /// A new scenario at 8 kHz with no clips.
    pub fn new(seed: u64, duration_s: f64, bed: BedKind) -> Self {
        Self {
            seed,
            rate: 8000,
            duration_s,
            bed,
            clips: Vec::new(),
            placements: Vec::new(),
            episode_noise_snr_db: None,
            episode_gain_db: 0.0,
            episode_mp3_kbps: None,
            use_espeak: false,
        }
    }

    /// Sets the sample rate of the rendered audio.
    pub fn with_rate(mut self, rate: u32) -> Self {
        self.rate = rate;
        self
    }

    /// Adds a clip; returns its index. The clip's seed derives from the
    /// scenario seed and the clip's index.
    pub fn add_clip(&mut self, name: &str, kind: ClipKind, duration_s: f64) -> usize {
        let seed = self
            .seed
            .wrapping_mul(1_000_003)
            .wrapping_add(self.clips.len() as u64 * 7919 + 17);
        self.clips.push(ClipSpec {
            name: name.to_owned(),
            kind,
            duration_s,
            seed,
        });
        self.clips.len() - 1
    }

    /// Adds a clip with an explicit synthesis seed (to share a clip library
    /// between scenarios); returns its index.
    pub fn add_clip_seeded(
        &mut self,
        name: &str,
        kind: ClipKind,
        duration_s: f64,
        seed: u64,
    ) -> usize {
        self.clips.push(ClipSpec {
            name: name.to_owned(),
            kind,
            duration_s,
            seed,
        });
        self.clips.len() - 1
    }

    /// Places a clip unchanged.
    pub fn place(&mut self, clip: usize, offset_s: f64, placement: Placement) -> &mut Self {
        self.place_degraded(clip, offset_s, placement, Degrade::default())
    }

    /// Places a degraded copy of a clip.
    pub fn place_degraded(
        &mut self,
        clip: usize,
        offset_s: f64,
        placement: Placement,
        degrade: Degrade,
    ) -> &mut Self {
        self.placements.push(Placed {
            clip,
            offset_s,
            placement,
            degrade,
        });
        self
    }

    /// Synthesises one clip of the scenario.
    pub fn clip_audio(&self, clip: usize) -> Vec<f32> {
        let c = &self.clips[clip];
        synth_clip(c.kind, c.duration_s, c.seed, self.rate, self.use_espeak)
    }

    /// Renders everything in memory (no MP3 step).
    pub fn render(&self) -> Rendered {
        self.render_inner(true)
    }

    /// Renders the episode and truth; `Rendered::clips` holds audio only for
    /// the clips that are placed (cheaper for big clip libraries).
    pub fn render_episode(&self) -> Rendered {
        self.render_inner(false)
    }

    fn render_inner(&self, all_clips: bool) -> Rendered {
        let rate = self.rate as f64;
        let n = (self.duration_s * rate).round() as usize;
        let mut ep = synth_bed(self.bed, self.duration_s, self.seed ^ 0xBEDBED, self.rate);
        ep.resize(n, 0.0);
        let bed_rms = dsp::rms(&ep).max(1e-4);
        // Only placed clips are synthesised here; `render` adds the others.
        let clips: Vec<(String, Vec<f32>)> = (0..self.clips.len())
            .map(|i| {
                let used = self.placements.iter().any(|p| p.clip == i);
                let audio = if used || all_clips {
                    self.clip_audio(i)
                } else {
                    Vec::new()
                };
                (self.clips[i].name.clone(), audio)
            })
            .collect();
        let mut occ = Vec::new();
        for (k, p) in self.placements.iter().enumerate() {
            let src = &clips[p.clip].1;
            let d = &p.degrade;
            let a = ((d.part.0.clamp(0.0, 1.0) * src.len() as f64) as usize).min(src.len());
            let b = ((d.part.1.clamp(0.0, 1.0) * src.len() as f64) as usize).clamp(a, src.len());
            let mut x = src[a..b].to_vec();
            if (d.speed - 1.0).abs() > 1e-9 {
                x = dsp::change_speed(&x, d.speed);
            }
            if (d.tempo - 1.0).abs() > 1e-9 {
                x = degrade::change_tempo(&x, d.tempo, self.rate);
            }
            degrade::apply_gain_db(&mut x, d.gain_db);
            if let Some(snr) = d.noise_snr_db {
                degrade::add_noise_snr(&mut x, snr, self.seed ^ ((k as u64 + 1) * 0x51_7CC1));
            }
            let start = (p.offset_s * rate).round() as usize;
            match p.placement {
                Placement::Splice => {
                    let fade = (0.005 * rate) as usize;
                    for (i, v) in x.iter().enumerate() {
                        let j = start + i;
                        if j >= ep.len() {
                            break;
                        }
                        let w = if i < fade {
                            i as f32 / fade as f32
                        } else if i + fade > x.len() {
                            (x.len() - i) as f32 / fade as f32
                        } else {
                            1.0
                        };
                        ep[j] = ep[j] * (1.0 - w) + v * w;
                    }
                }
                Placement::Mix { clip_db } => {
                    let g = bed_rms * 10f32.powf(clip_db / 20.0) / dsp::rms(src).max(1e-6);
                    for (i, v) in x.iter().enumerate() {
                        if let Some(e) = ep.get_mut(start + i) {
                            *e += v * g;
                        }
                    }
                }
            }
            occ.push(TruthOccurrence {
                clip: self.clips[p.clip].name.clone(),
                offset_s: start as f64 / rate,
                speed: d.speed * d.tempo,
                clip_start_s: a as f64 / rate,
                clip_end_s: b as f64 / rate,
                placement: p.placement,
                degrade: d.clone(),
            });
        }
        degrade::apply_gain_db(&mut ep, self.episode_gain_db);
        if let Some(snr) = self.episode_noise_snr_db {
            degrade::add_noise_snr(&mut ep, snr, self.seed ^ 0x00C0_FFEE);
        }
        // Keep the mix in range.
        let peak = ep.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        if peak > 0.99 {
            let g = 0.99 / peak;
            ep.iter_mut().for_each(|v| *v *= g);
        }
        occ.sort_by(|a, b| a.offset_s.total_cmp(&b.offset_s));
        let truth = Truth {
            episode: "episode.wav".into(),
            duration_s: n as f64 / rate,
            clips: self
                .clips
                .iter()
                .map(|c| TruthClip {
                    name: c.name.clone(),
                    file: format!("clips/{}.wav", c.name),
                    kind: c.kind,
                    duration_s: (c.duration_s * rate).round() / rate,
                })
                .collect(),
            occurrences: occ,
            notes: Vec::new(),
        };
        Rendered {
            episode: ep,
            clips,
            truth,
        }
    }

    /// Renders and writes `episode.wav` (or `episode.mp3`), `clips/NAME.wav`
    /// and `truth.json` into `dir` (created if needed). Returns the truth.
    pub fn write_to(&self, dir: &Path) -> std::io::Result<Truth> {
        let r = self.render();
        std::fs::create_dir_all(dir.join("clips"))?;
        let mut truth = r.truth;
        let wav = dir.join("episode.wav");
        write_wav(&wav, &r.episode, self.rate, 1)?;
        if let Some(kbps) = self.episode_mp3_kbps {
            let mp3 = dir.join("episode.mp3");
            match lame_encode(&wav, &mp3, kbps, true) {
                Ok(()) => {
                    std::fs::remove_file(&wav)?;
                    truth.episode = "episode.mp3".into();
                }
                Err(e) => truth.notes.push(format!(
                    "MP3 {kbps} kbps variant skipped ({e}); episode left as WAV"
                )),
            }
        }
        for (name, x) in &r.clips {
            write_wav(&dir.join(format!("clips/{name}.wav")), x, self.rate, 1)?;
        }
        let json = serde_json::to_string_pretty(&truth).map_err(std::io::Error::other)?;
        std::fs::write(dir.join("truth.json"), json)?;
        Ok(truth)
    }
}

/// Writes 16-bit PCM WAV (`channels` copies of the mono signal).
pub fn write_wav(path: &Path, x: &[f32], rate: u32, channels: u16) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let data_len = (x.len() * 2 * channels as usize) as u32;
    f.write_all(b"RIFF")?;
    f.write_all(&(36 + data_len).to_le_bytes())?;
    f.write_all(b"WAVEfmt ")?;
    f.write_all(&16u32.to_le_bytes())?;
    f.write_all(&1u16.to_le_bytes())?;
    f.write_all(&channels.to_le_bytes())?;
    f.write_all(&rate.to_le_bytes())?;
    f.write_all(&(rate * 2 * channels as u32).to_le_bytes())?;
    f.write_all(&(2 * channels).to_le_bytes())?;
    f.write_all(&16u16.to_le_bytes())?;
    f.write_all(b"data")?;
    f.write_all(&data_len.to_le_bytes())?;
    for v in x {
        let s = (v.clamp(-1.0, 1.0) * 32767.0).round() as i16;
        for _ in 0..channels {
            f.write_all(&s.to_le_bytes())?;
        }
    }
    f.flush()
}

/// Encodes a WAV to MP3 with `lame` (CBR `kbps`, mono if `mono`).
pub fn lame_encode(wav: &Path, mp3: &Path, kbps: u32, mono: bool) -> Result<(), String> {
    let mut cmd = Command::new("lame");
    cmd.arg("--quiet")
        .arg("-q")
        .arg("7")
        .arg("-b")
        .arg(kbps.to_string());
    if mono {
        cmd.arg("-m").arg("m");
    }
    let out = cmd
        .arg(wav)
        .arg(mp3)
        .output()
        .map_err(|e| format!("lame not runnable: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "lame failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// True if `tool` runs (`tool --version`).
pub fn tool_available(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

// ---------------------------------------------------------------- synthesis

/// Two-pole resonator.
struct Reson {
    a1: f64,
    a2: f64,
    g: f64,
    y1: f64,
    y2: f64,
}

impl Reson {
    fn new() -> Self {
        Self {
            a1: 0.0,
            a2: 0.0,
            g: 0.0,
            y1: 0.0,
            y2: 0.0,
        }
    }
    fn set(&mut self, f: f64, bw: f64, rate: f64) {
        let r = (-PI * bw / rate).exp();
        self.a1 = 2.0 * r * (2.0 * PI * f / rate).cos();
        self.a2 = -r * r;
        self.g = 1.0 - r;
    }
    fn tick(&mut self, x: f64) -> f64 {
        let y = self.g * x + self.a1 * self.y1 + self.a2 * self.y2;
        self.y2 = self.y1;
        self.y1 = y;
        y
    }
}

/// Formant speech-like babble: phrases of syllables (fricative + voiced
/// vowel with moving formants) separated by pauses. `f0` sets the voice.
pub fn synth_speech(dur_s: f64, seed: u64, rate: u32, f0: f64) -> Vec<f32> {
    let rate_f = rate as f64;
    let n = (dur_s * rate_f) as usize;
    let mut rng = Rng::new(seed);
    let mut out = vec![0.0f32; n];
    let (mut r1, mut r2, mut r3, mut rn) = (Reson::new(), Reson::new(), Reson::new(), Reson::new());
    let mut t = (rng.range(0.0, 0.3) * rate_f) as usize;
    let mut phase = 0.0f64;
    const VOWELS: [(f64, f64); 6] = [
        (730.0, 1090.0),
        (270.0, 2290.0),
        (530.0, 1840.0),
        (570.0, 840.0),
        (440.0, 1020.0),
        (300.0, 870.0),
    ];
    while t < n {
        let syllables = 4 + rng.below(12);
        let base = f0 * rng.range(0.85, 1.15);
        for s in 0..syllables {
            // Optional fricative.
            if rng.uniform() < 0.6 {
                let len = (rng.range(0.03, 0.09) * rate_f) as usize;
                rn.set(rng.range(2000.0, 3600.0), 900.0, rate_f);
                let amp = rng.range(0.05, 0.15);
                for i in 0..len {
                    if t + i >= n {
                        break;
                    }
                    let env = (PI * i as f64 / len as f64).sin();
                    out[t + i] += (rn.tick(rng.normal()) * amp * env * 4.0) as f32;
                }
                t += len;
            }
            let len = (rng.range(0.10, 0.28) * rate_f) as usize;
            let (va, vb) = (
                VOWELS[rng.below(VOWELS.len())],
                VOWELS[rng.below(VOWELS.len())],
            );
            let (fa1, fa2) = (va.0 * rng.range(0.85, 1.15), va.1 * rng.range(0.85, 1.15));
            let (fb1, fb2) = (vb.0 * rng.range(0.85, 1.15), vb.1 * rng.range(0.85, 1.15));
            let f3 = rng.range(2300.0, 2900.0);
            let amp = rng.range(0.4, 1.0);
            let decl = 1.0 - 0.25 * s as f64 / syllables as f64;
            for i in 0..len {
                if t + i >= n {
                    break;
                }
                let u = i as f64 / len as f64;
                if i % 32 == 0 {
                    r1.set(fa1 + (fb1 - fa1) * u, 80.0, rate_f);
                    r2.set(fa2 + (fb2 - fa2) * u, 110.0, rate_f);
                    r3.set(f3, 160.0, rate_f);
                }
                let f = base
                    * decl
                    * (1.0 + 0.08 * (PI * u).sin())
                    * (1.0 + 0.017 * (rng.uniform() - 0.5));
                phase += f / rate_f;
                let exc = if phase >= 1.0 {
                    phase -= 1.0;
                    1.0
                } else {
                    0.0
                } + 0.07 * (rng.uniform() - 0.5);
                let v = r1.tick(exc) * 1.0 + r2.tick(exc) * 0.6 + r3.tick(exc) * 0.25;
                let env = (PI * u).sin().powf(0.6);
                out[t + i] += (v * amp * env * 6.0) as f32;
            }
            t += len + (rng.range(0.0, 0.05) * rate_f) as usize;
        }
        t += (rng.range(0.15, 0.6) * rate_f) as usize;
    }
    normalize(&mut out, 0.1);
    out
}

fn midi_hz(m: f64) -> f64 {
    440.0 * 2f64.powf((m - 69.0) / 12.0)
}

/// Timbre of one instrument: harmonic amplitudes, phases, inharmonicity, vibrato.
#[derive(Clone)]
struct Timbre {
    amps: Vec<f64>,
    phases: Vec<f64>,
    inharm: f64,
    vib_rate: f64,
    vib_depth: f64,
}

impl Timbre {
    fn random(rng: &mut Rng, harmonics: usize) -> Self {
        let tilt = rng.range(0.6, 1.6);
        Self {
            amps: (1..=harmonics)
                .map(|h| rng.range(0.4, 1.0) / (h as f64).powf(tilt))
                .collect(),
            phases: (0..harmonics).map(|_| rng.range(0.0, 2.0 * PI)).collect(),
            inharm: rng.range(0.0, 0.0008),
            vib_rate: rng.range(3.0, 6.5),
            vib_depth: rng.range(0.0, 0.006),
        }
    }
}

/// Adds a decaying tone of the given timbre.
#[allow(clippy::too_many_arguments)]
fn add_tone(
    out: &mut [f32],
    rate: f64,
    start: usize,
    len: usize,
    hz: f64,
    amp: f64,
    timbre: &Timbre,
    decay: f64,
) {
    for (h, (a, ph)) in timbre.amps.iter().zip(&timbre.phases).enumerate() {
        let hn = (h + 1) as f64;
        let f = hz * hn * (1.0 + timbre.inharm * hn * hn).sqrt();
        if f > rate * 0.45 {
            break;
        }
        let mut phase = *ph;
        let mut vib = 1.0;
        for i in 0..len {
            let j = start + i;
            if j >= out.len() {
                break;
            }
            let t = i as f64 / rate;
            if i % 32 == 0 {
                vib = 1.0 + timbre.vib_depth * (2.0 * PI * timbre.vib_rate * t).sin();
            }
            phase += 2.0 * PI * f * vib / rate;
            let env = (1.0 - (-t * 200.0).exp())
                * (-t * decay).exp()
                * (1.0 - i as f64 / len as f64).sqrt();
            out[j] += (phase.sin() * a * amp * env) as f32;
        }
    }
}

/// Drum kit of one piece.
#[derive(Clone)]
struct Kit {
    kick_f: f64,
    kick_sweep: f64,
    kick_decay: f64,
    snare_f: f64,
    snare_decay: f64,
    hat_decay: f64,
}

impl Kit {
    fn random(rng: &mut Rng) -> Self {
        Self {
            kick_f: rng.range(40.0, 70.0),
            kick_sweep: rng.range(60.0, 200.0),
            kick_decay: rng.range(12.0, 25.0),
            snare_f: rng.range(150.0, 260.0),
            snare_decay: rng.range(18.0, 35.0),
            hat_decay: rng.range(40.0, 90.0),
        }
    }
}

fn add_drum(
    out: &mut [f32],
    rate: f64,
    start: usize,
    kind: usize,
    amp: f64,
    kit: &Kit,
    rng: &mut Rng,
) {
    let len = (0.25 * rate) as usize;
    let mut hp_prev = 0.0;
    let mut phase = rng.range(0.0, 2.0 * PI);
    for i in 0..len {
        let j = start + i;
        if j >= out.len() {
            break;
        }
        let t = i as f64 / rate;
        let v = match kind {
            0 => {
                phase += 2.0 * PI * (kit.kick_f + kit.kick_sweep * (-t * 30.0).exp()) / rate;
                phase.sin() * (-t * kit.kick_decay).exp()
            }
            1 => {
                phase += 2.0 * PI * kit.snare_f / rate;
                (rng.normal() * 0.6 + phase.sin() * 0.4) * (-t * kit.snare_decay).exp()
            }
            _ => {
                let n = rng.normal();
                let hp = n - hp_prev;
                hp_prev = n;
                hp * 0.4 * (-t * kit.hat_decay).exp()
            }
        };
        out[j] += (v * amp) as f32;
    }
}

/// Music: chord progression, bass line and drums at a random tempo.
pub fn synth_music(dur_s: f64, seed: u64, rate: u32) -> Vec<f32> {
    let rate_f = rate as f64;
    let n = (dur_s * rate_f) as usize;
    let mut rng = Rng::new(seed);
    let mut out = vec![0.0f32; n];
    let bpm = rng.range(85.0, 135.0);
    let kit = Kit::random(&mut rng);
    let pad = Timbre::random(&mut rng, 6);
    let bass = Timbre::random(&mut rng, 4);
    let lead = Timbre::random(&mut rng, 3);
    let beat = (60.0 / bpm * rate_f) as usize;
    let key = 48.0 + rng.below(12) as f64;
    const PROG: [[f64; 3]; 6] = [
        [0., 4., 7.],
        [5., 9., 12.],
        [7., 11., 14.],
        [9., 12., 16.],
        [2., 5., 9.],
        [4., 7., 11.],
    ];
    let mut t = 0usize;
    let mut bar = 0usize;
    while t < n {
        let chord = PROG[rng.below(PROG.len())];
        for (k, c) in chord.iter().enumerate() {
            add_tone(
                &mut out,
                rate_f,
                t,
                beat * 4,
                midi_hz(key + 12.0 + c),
                0.08,
                &pad,
                0.8 + k as f64 * 0.1,
            );
        }
        for b in 0..4 {
            let bt = t + b * beat;
            add_tone(
                &mut out,
                rate_f,
                bt,
                beat,
                midi_hz(key - 12.0 + chord[b % 3]),
                0.12,
                &bass,
                3.0,
            );
            add_drum(
                &mut out,
                rate_f,
                bt,
                if b % 2 == 0 { 0 } else { 1 },
                0.35,
                &kit,
                &mut rng,
            );
            add_drum(&mut out, rate_f, bt + beat / 2, 2, 0.25, &kit, &mut rng);
            if rng.uniform() < 0.7 {
                let note =
                    key + 24.0 + chord[rng.below(3)] + if rng.uniform() < 0.3 { 2.0 } else { 0.0 };
                add_tone(&mut out, rate_f, bt, beat, midi_hz(note), 0.06, &lead, 2.0);
            }
        }
        t += beat * 4;
        bar += 1;
    }
    let _ = bar;
    normalize(&mut out, 0.1);
    out
}

fn normalize(x: &mut [f32], target_rms: f32) {
    let r = dsp::rms(x);
    if r > 0.0 {
        let g = target_rms / r;
        x.iter_mut().for_each(|v| *v *= g);
    }
}

/// A bed of the given kind.
pub fn synth_bed(kind: BedKind, dur_s: f64, seed: u64, rate: u32) -> Vec<f32> {
    let n = (dur_s * rate as f64) as usize;
    let mut rng = Rng::new(seed ^ 0x3141);
    let mut out = Vec::with_capacity(n);
    let mut k = 0u64;
    while out.len() < n {
        // Speech alternates two voices every 20 s; mixed beds alternate
        // speech and music sections of 30-90 s.
        let (len_s, music) = match kind {
            BedKind::Speech => (20.0, false),
            BedKind::Music => (dur_s, true),
            BedKind::Mixed => (rng.range(30.0, 90.0), k % 2 == 1),
            BedKind::Silence => return vec![0.0; n],
        };
        let len = ((len_s * rate as f64) as usize).min(n - out.len()).max(1);
        let sec_seed = seed.wrapping_add(k.wrapping_mul(0x9E37_79B9));
        let sec = if music {
            synth_music(len as f64 / rate as f64 + 0.01, sec_seed, rate)
        } else {
            let f0 = if k % 4 < 2 { 115.0 } else { 205.0 };
            synth_speech(len as f64 / rate as f64 + 0.01, sec_seed, rate, f0)
        };
        let take = len.min(sec.len());
        out.extend_from_slice(&sec[..take]);
        if take < len {
            out.resize(out.len() + len - take, 0.0);
        }
        k += 1;
    }
    out.truncate(n);
    out
}

/// A clip of the given kind (normalised to -14 dBFS RMS-ish, 10 ms fades).
pub fn synth_clip(kind: ClipKind, dur_s: f64, seed: u64, rate: u32, use_espeak: bool) -> Vec<f32> {
    let rate_f = rate as f64;
    let n = (dur_s * rate_f).round() as usize;
    let mut rng = Rng::new(seed);
    let mut out = match kind {
        ClipKind::SpokenDrop => {
            let e = if use_espeak {
                espeak_drop(seed, rate)
            } else {
                None
            };
            e.unwrap_or_else(|| synth_speech(dur_s + 0.5, seed, rate, rng.range(140.0, 180.0)))
        }
        ClipKind::Sting => {
            let mut x = vec![0.0f32; n];
            let root = 60.0 + rng.below(24) as f64;
            let parts = 2 + rng.below(3);
            for k in 0..parts {
                let m = root + [0.0, 7.0, 12.0, 16.0, 19.0][k];
                let nh = 3 + rng.below(5);
                let tim = Timbre::random(&mut rng, nh);
                let (hz, decay) = (midi_hz(m) * rng.range(0.995, 1.005), rng.range(1.5, 4.0));
                add_tone(&mut x, rate_f, 0, n, hz, 0.3, &tim, decay);
            }
            // Bright attack.
            let hit = (0.02 * rate_f) as usize;
            for (i, v) in x.iter_mut().take(hit).enumerate() {
                *v += (rng.normal() * 0.3 * (1.0 - i as f64 / hit as f64)) as f32;
            }
            x
        }
        ClipKind::Jingle | ClipKind::Theme => {
            let mut x = synth_music(dur_s, seed, rate);
            // A lead melody on top so it differs from beds.
            let note_len = (rng.range(0.12, 0.3) * rate_f) as usize;
            let base = 67.0 + rng.below(8) as f64;
            let tim = Timbre::random(&mut rng, 5);
            let mut t = 0;
            while t < n {
                let m = base + [0.0, 2.0, 4.0, 7.0, 9.0, 12.0][rng.below(6)];
                add_tone(&mut x, rate_f, t, note_len * 2, midi_hz(m), 0.15, &tim, 3.0);
                t += note_len;
            }
            x
        }
    };
    out.resize(n, 0.0);
    normalize(&mut out, 0.2);
    let fade = ((0.01 * rate_f) as usize).min(n / 4);
    for i in 0..fade {
        let w = i as f32 / fade as f32;
        out[i] *= w;
        out[n - 1 - i] *= w;
    }
    out
}

fn espeak_drop(seed: u64, rate: u32) -> Option<Vec<f32>> {
    const PHRASES: [&str; 6] = [
        "You are listening to the archivist",
        "Stay tuned, more after the break",
        "This episode is brought to you by our listeners",
        "Welcome back to the show",
        "Breaking news from the archive",
        "Thanks for listening, see you next week",
    ];
    let dir = std::env::temp_dir().join(format!("archivist-espeak-{}-{seed}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let wav: PathBuf = dir.join("drop.wav");
    let ok = Command::new("espeak-ng")
        .arg("-w")
        .arg(&wav)
        .arg(PHRASES[(seed % PHRASES.len() as u64) as usize])
        .output()
        .ok()?
        .status
        .success();
    if !ok {
        return None;
    }
    let d = archivist_matcher::decode::decode_file(&wav).ok()?;
    let _ = std::fs::remove_dir_all(&dir);
    let x = d.samples;
    Some(if rate == archivist_matcher::ANALYSIS_RATE {
        x
    } else {
        dsp::resample(&x, rate as f64 / archivist_matcher::ANALYSIS_RATE as f64)
    })
}
