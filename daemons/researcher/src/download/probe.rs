//! Is this file audio? A symphonia probe (container + an audio track with a known codec)
//! reads only the headers, so an HTML error page or a JSON body is refused before anyone
//! spends time decoding it.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use symphonia::core::codecs::CODEC_TYPE_NULL;
use symphonia::core::formats::FormatOptions;
use symphonia::core::io::MediaSourceStream;
use symphonia::core::meta::MetadataOptions;
use symphonia::core::probe::Hint;

use archivist_matcher::decode::{self, container, guard, make_codec_decoder, SUPPORTED_CODECS};

use super::DownloadError;

/// Why a probe refused a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No supported container with an audio track.
    NotAudio(String),
    /// Audio, in a codec this build does not decode; the text names it.
    Codec(String),
}

/// Probes a file; `Err` when no supported container with an audio track whose codec
/// this build decodes is found.
pub fn probe_audio(path: &Path) -> Result<(), Refusal> {
    let mut first = Vec::with_capacity(400);
    if let Ok(f) = File::open(path) {
        let _ = f.take(400).read_to_end(&mut first);
    }
    if let Some(name) = container::unsupported_container(&first) {
        return Err(Refusal::NotAudio(format!(
            "its container is {name}, which this build does not read (it reads {})",
            container::READ_CONTAINERS
        )));
    }
    if let Some(codec) = unsupported_magic(path) {
        return Err(Refusal::Codec(format!(
            "{codec} is not supported (this build decodes {SUPPORTED_CODECS})"
        )));
    }
    // A malformed header can panic symphonia's reader: a reason naming the container.
    let mut head = [0u8; 8];
    let n = File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    let container = guard::container_name(&head[..n]);
    guard::guarded(
        || format!("the {container} reader, reading the header"),
        || probe_container(path),
    )
    .map_err(Refusal::NotAudio)?
}

fn probe_container(path: &Path) -> Result<(), Refusal> {
    let refuse = Refusal::NotAudio;
    let file =
        File::open(path).map_err(|e| refuse(format!("cannot open {}: {e}", path.display())))?;
    // The decoder's checks of the leading metadata first: a hostile length would make
    // the reader below allocate gigabytes (aborting the process), and an ID3v2 frame
    // overrunning its tag is skipped. A file they refuse is audio the decode names as
    // corrupt (with the field), not "not audio".
    let Ok((source, _)) = decode::checked_source(Box::new(file)) else {
        return Ok(());
    };
    let mss = MediaSourceStream::new(source, Default::default());
    let probed = symphonia::default::get_probe()
        .format(
            &Hint::new(),
            mss,
            &FormatOptions::default(),
            &MetadataOptions::default(),
        )
        .map_err(|e| refuse(format!("no supported audio container: {e}")))?;
    let track = probed
        .format
        .tracks()
        .iter()
        .find(|t| t.codec_params.codec != CODEC_TYPE_NULL)
        .ok_or_else(|| refuse("no audio track".to_string()))?;
    make_codec_decoder(&track.codec_params)
        .map(|_| ())
        .map_err(Refusal::Codec)
}

/// Audio formats symphonia has no reader for at all, named by their magic bytes (the
/// probe would only say "no supported container").
fn unsupported_magic(path: &Path) -> Option<&'static str> {
    let mut buf = [0u8; 4];
    let n = File::open(path).and_then(|mut f| f.read(&mut buf)).ok()?;
    match &buf[..n] {
        b"wvpk" => Some("WavPack"),
        b"MAC " => Some("Monkey's Audio"),
        b"TTA1" => Some("TTA"),
        b"MPCK" | b"MP+\x07" => Some("Musepack"),
        _ => None,
    }
}

/// Names compressed wrappers a server may send without a `Content-Encoding` header
/// (a `.gz` of an episode): the probe would only say "no supported container".
fn wrapper(path: &Path) -> Option<&'static str> {
    let mut buf = [0u8; 6];
    let n = File::open(path).and_then(|mut f| f.read(&mut buf)).ok()?;
    let head = &buf[..n];
    if head.starts_with(&[0x1f, 0x8b]) {
        Some("gzip-compressed data (served without Content-Encoding: gzip, so not decompressed)")
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Some("zstd-compressed data")
    } else if head.starts_with(b"BZh") {
        Some("bzip2-compressed data")
    } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        Some("xz-compressed data")
    } else if head.starts_with(b"PK\x03\x04") {
        Some("a zip archive")
    } else {
        None
    }
}

fn head_text(path: &Path) -> String {
    let mut buf = [0u8; 48];
    let n = File::open(path)
        .and_then(|mut f| f.read(&mut buf))
        .unwrap_or(0);
    buf[..n]
        .iter()
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '.'
            }
        })
        .collect()
}

/// Checks a downloaded file is audio, on a blocking thread; the error names the URL, the
/// Content-Type and the first bytes ("not audio: text/html body from http://...").
pub async fn check_audio(
    path: &Path,
    url: &str,
    content_type: Option<&str>,
) -> Result<(), DownloadError> {
    let owned = path.to_path_buf();
    let verdict = tokio::task::spawn_blocking(move || {
        probe_audio(&owned).map_err(|refusal| match refusal {
            Refusal::NotAudio(reason) => {
                let reason = match wrapper(&owned) {
                    Some(what) => format!("{what}; {reason}"),
                    None => reason,
                };
                (Refusal::NotAudio(reason), head_text(&owned))
            }
            codec => (codec, String::new()),
        })
    })
    .await
    .map_err(|e| DownloadError::Io {
        path: path.display().to_string(),
        reason: format!("probe task failed: {e}"),
    })?;
    verdict.map_err(|(refusal, head)| match refusal {
        // Audio in a codec we do not decode, whatever the Content-Type said.
        Refusal::Codec(reason) => DownloadError::UnsupportedCodec {
            url: url.to_string(),
            reason,
        },
        Refusal::NotAudio(reason) => DownloadError::NotAudio {
            url: url.to_string(),
            content_type: content_type.unwrap_or("unknown").to_string(),
            reason,
            head,
        },
    })
}
