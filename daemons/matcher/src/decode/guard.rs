//! Panics in the readers and decoders, as errors an operator can read.
//!
//! symphonia 0.5 panics on some malformed files (a WAV with a sample rate of 0 or an
//! IMA ADPCM block align that does not fit its channels, an ALAC cookie with a bad
//! shift, an MP4 `ilst` or `stsc` atom with sizes that underflow). The daemons caught
//! those at their task boundary, so the job failed alone, but its message was the
//! panic text with "invalid configuration", "decode task failed" or the researcher's
//! work-file path instead of the URL. Each call into symphonia that a malformed file
//! can make panic is run through [`guarded`], which names the stage (the container's
//! reader on its header, the codec's decoder on packet N) and the panic's message.

use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs `f`; a panic becomes `Err` naming `stage` ("the WAV reader, reading the
/// header") and the panic's message, so the caller can fail the one input it was
/// reading with a clear reason.
pub fn guarded<T>(stage: impl FnOnce() -> String, f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_string());
        format!(
            "{} failed on malformed data (a decoder bug this file triggers: {message}); the file is damaged or written in a form this build cannot read",
            stage()
        )
    })
}

/// The container a body's first bytes name, for [`guarded`]'s stage ("WAV", "MP4").
pub fn container_name(head: &[u8]) -> &'static str {
    match head {
        h if h.starts_with(b"RIFF") || h.starts_with(b"RF64") => "WAV",
        h if h.starts_with(b"fLaC") => "FLAC",
        h if h.starts_with(b"OggS") => "Ogg",
        h if h.get(4..8) == Some(b"ftyp".as_slice())
            || h.get(4..8) == Some(b"moov".as_slice())
            || h.get(4..8) == Some(b"mdat".as_slice()) =>
        {
            "MP4"
        }
        h if h.starts_with(b"ID3") => "MP3/ADTS",
        h if h.first() == Some(&0xff) => "MP3/ADTS",
        _ => "container",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_a_reason_naming_the_stage() {
        let r: Result<(), String> = guarded(
            || "the WAV reader, reading the header".into(),
            || panic!("attempt to subtract with overflow"),
        );
        let text = r.unwrap_err();
        assert!(
            text.starts_with("the WAV reader, reading the header failed on malformed data"),
            "{text}"
        );
        assert!(text.contains("attempt to subtract with overflow"), "{text}");
        assert_eq!(guarded(String::new, || 5), Ok(5));
    }
}
