//! Containers this build does not read, named by their first bytes.
//!
//! symphonia 0.5 has no reader for Matroska/WebM, AIFF, RF64, Wave64, CAF, MPEG-TS, ASF
//! (WMA) or raw AC-3/E-AC-3.
//! Without a name for them the probe fell through to its MP3/ADTS scan, found false
//! sync words in the audio data and refused the file with an invented reason ("AAC with
//! 4 channels", "MPEG-1 Layer I", "no audio samples"), sending an operator after a
//! broken file or an encoder that is not there. The container is named instead.

use std::io::{Read, Seek, SeekFrom};

use symphonia::core::io::MediaSource;

/// Containers this build reads, for the refusal.
pub const READ_CONTAINERS: &str = "MP4/M4A, Ogg, FLAC, WAV, MP3 and ADTS AAC";

/// The name of a container this build does not read, if `head` (a body's first 400
/// bytes or all of a shorter one) starts one.
pub fn unsupported_container(head: &[u8]) -> Option<&'static str> {
    let at = |i: usize, magic: &[u8]| head.get(i..i + magic.len()) == Some(magic);
    if at(0, &[0x1a, 0x45, 0xdf, 0xa3]) {
        Some("Matroska/WebM")
    } else if at(0, b"FORM") && (at(8, b"AIFF") || at(8, b"AIFC")) {
        Some("AIFF")
    } else if at(0, b"RF64") || at(0, b"BW64") {
        Some("RF64 (WAV over 4 GB)")
    } else if at(0, b"riff") && at(24, b"wave") {
        Some("Wave64")
    } else if at(0, b"caff") {
        Some("CAF")
    } else if [0, 188, 376].iter().all(|i| head.get(*i) == Some(&0x47)) {
        Some("MPEG transport stream")
    } else if at(
        0,
        &[
            0x30, 0x26, 0xb2, 0x75, 0x8e, 0x66, 0xcf, 0x11, 0xa6, 0xd9, 0x00, 0xaa, 0x00, 0x62,
            0xce, 0x6c,
        ],
    ) {
        // The ASF header object's GUID.
        Some("ASF (WMA)")
    } else if at(0, &[0x0b, 0x77]) {
        // A Dolby sync word; bsid (byte 5, top 5 bits) 16 is E-AC-3, up to 10 AC-3.
        match head.get(5).map(|b| b >> 3) {
            Some(0..=10) => Some("raw AC-3"),
            Some(11..=16) => Some("raw E-AC-3"),
            _ => None,
        }
    } else {
        None
    }
}

/// [`unsupported_container`] for a seekable source (rewound).
pub(super) fn sniff(source: &mut Box<dyn MediaSource>) -> Option<&'static str> {
    let mut head = Vec::with_capacity(400);
    source.seek(SeekFrom::Start(0)).ok()?;
    let read = source.by_ref().take(400).read_to_end(&mut head);
    source.seek(SeekFrom::Start(0)).ok()?;
    read.ok()?;
    unsupported_container(&head)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containers_are_named_by_their_magic() {
        assert_eq!(
            unsupported_container(&[0x1a, 0x45, 0xdf, 0xa3, 1, 2]),
            Some("Matroska/WebM")
        );
        assert_eq!(unsupported_container(b"FORM\0\0\0\0AIFFCOMM"), Some("AIFF"));
        assert_eq!(
            unsupported_container(b"RF64\xff\xff\xff\xffWAVEds64"),
            Some("RF64 (WAV over 4 GB)")
        );
        let mut ts = vec![0u8; 400];
        ts[0] = 0x47;
        ts[188] = 0x47;
        ts[376] = 0x47;
        assert_eq!(unsupported_container(&ts), Some("MPEG transport stream"));
        assert_eq!(unsupported_container(b"RIFF\0\0\0\0WAVEfmt "), None);
        assert_eq!(unsupported_container(b"ID3\x04"), None);
    }
}
