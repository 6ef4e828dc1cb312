//! Decoder tests: formats, resampling alignment, gapless MP3, bad input.

use std::path::{Path, PathBuf};

use archivist_matcher::decode::{decode_file, decode_reader, DecodeError};
use archivist_matcher::{MatchConfig, Matcher};
use archivist_testaudio::{
    lame_encode, synth_bed, synth_clip, tool_available, write_wav, BedKind, ClipKind,
};

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "archivist-matcher-test-{}-{name}",
        std::process::id()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Writes a 44.1 kHz episode with a clip spliced at `at` s; returns the clip at 44.1 kHz.
fn episode_44k(dir: &Path, at: f64, channels: u16) -> (PathBuf, PathBuf) {
    let rate = 44100;
    let mut ep = synth_bed(BedKind::Speech, 12.0, 77, rate);
    let clip = synth_clip(ClipKind::Jingle, 2.0, 78, rate, false);
    let s = (at * rate as f64) as usize;
    ep[s..s + clip.len()].copy_from_slice(&clip);
    let e = dir.join("ep.wav");
    let c = dir.join("clip.wav");
    write_wav(&e, &ep, rate, channels).unwrap();
    write_wav(&c, &clip, rate, 1).unwrap();
    (e, c)
}

fn offset_of(ep: &Path, clip: &Path) -> f64 {
    let e = decode_file(ep).unwrap();
    let c = decode_file(clip).unwrap();
    let m = Matcher::new(&e.samples, MatchConfig::default());
    let r = m.find(&c.samples, "clip").unwrap();
    assert_eq!(r.occurrences.len(), 1, "{r:?}");
    r.occurrences[0].offset_s
}

#[test]
fn wav_44k_stereo_resampled_keeps_offsets() {
    let d = tmpdir("wav");
    let (e, c) = episode_44k(&d, 4.321, 2);
    let dec = decode_file(&e).unwrap();
    assert_eq!(dec.source_rate, 44100);
    assert_eq!(dec.channels, 2);
    assert!((dec.duration_s - 12.0).abs() < 0.001, "{}", dec.duration_s);
    assert_eq!(dec.samples.len(), 96000);
    let off = offset_of(&e, &c);
    assert!((off - 4.321).abs() <= 0.001, "offset {off}");
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn mp3_gapless_offsets_are_exact() {
    if !tool_available("lame") {
        eprintln!("lame not installed: MP3 test skipped (scripts/matcher-deps.sh installs it)");
        return;
    }
    let d = tmpdir("mp3");
    let (e, c) = episode_44k(&d, 6.5, 1);
    let mp3 = d.join("ep.mp3");
    lame_encode(&e, &mp3, 64, true).unwrap();
    let dec = decode_file(&mp3).unwrap();
    assert!(
        (dec.duration_s - 12.0).abs() < 0.002,
        "gapless duration {}",
        dec.duration_s
    );
    let off = offset_of(&mp3, &c);
    assert!(
        (off - 6.5).abs() <= 0.002,
        "offset {off} (gapless decoding off would be ~25 ms late)"
    );
    // Truncated MP3: refused as incomplete (its LAME tag declares 12 s), never a
    // prefix passed off as the episode.
    let bytes = std::fs::read(&mp3).unwrap();
    let cut = d.join("cut.mp3");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    match decode_file(&cut) {
        Err(DecodeError::Incomplete {
            decoded_s,
            expected_s: Some(expected),
            ..
        }) => {
            assert!(decoded_s > 4.0 && decoded_s < 8.0, "{decoded_s}");
            assert!((expected - 12.0).abs() < 0.01, "{expected}");
        }
        other => panic!("a truncated MP3 must be incomplete: {other:?}"),
    }
    // In-memory reader.
    let r = decode_reader(Box::new(std::io::Cursor::new(bytes)), Some("mp3")).unwrap();
    assert_eq!(r.samples.len(), dec.samples.len());
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn bad_inputs_give_clear_errors() {
    let d = tmpdir("bad");
    let text = d.join("notes.mp3");
    std::fs::write(&text, "this is not audio at all, just text\n".repeat(50)).unwrap();
    assert!(
        matches!(decode_file(&text), Err(DecodeError::NotAudio { input, .. }) if input.contains("notes.mp3"))
    );

    let mut junk = Vec::new();
    let mut x: u32 = 12345;
    for _ in 0..20000 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        junk.push((x >> 16) as u8);
    }
    let jf = d.join("junk.wav");
    std::fs::write(&jf, &junk).unwrap();
    assert!(matches!(
        decode_file(&jf),
        Err(DecodeError::NotAudio { .. })
    ));

    let empty = d.join("empty.flac");
    std::fs::write(&empty, b"").unwrap();
    assert!(matches!(
        decode_file(&empty),
        Err(DecodeError::NotAudio { .. })
    ));

    let missing = d.join("missing.mp3");
    assert!(
        matches!(decode_file(&missing), Err(DecodeError::Io { input, .. }) if input.contains("missing.mp3"))
    );

    // WAV with a header and no samples.
    let nodata = d.join("nodata.wav");
    write_wav(&nodata, &[], 8000, 1).unwrap();
    assert!(matches!(
        decode_file(&nodata),
        Err(DecodeError::Empty { .. })
    ));

    // WAV declaring an absurd sample rate.
    let absurd = d.join("absurd.wav");
    write_wav(&absurd, &vec![0.1; 1000], 8000, 1).unwrap();
    let mut b = std::fs::read(&absurd).unwrap();
    b[24..28].copy_from_slice(&5u32.to_le_bytes());
    std::fs::write(&absurd, &b).unwrap();
    assert!(matches!(
        decode_file(&absurd),
        Err(DecodeError::AbsurdSampleRate { rate: Some(5), .. })
    ));

    // Unsupported codec: WAV format tag 0x0055 (MP3-in-WAV) with no decoder for it.
    let odd = d.join("odd.wav");
    write_wav(&odd, &vec![0.1; 1000], 8000, 1).unwrap();
    let mut b = std::fs::read(&odd).unwrap();
    b[20..22].copy_from_slice(&0x0092u16.to_le_bytes());
    std::fs::write(&odd, &b).unwrap();
    let r = decode_file(&odd);
    assert!(
        matches!(
            r,
            Err(DecodeError::UnsupportedCodec { .. }) | Err(DecodeError::NotAudio { .. })
        ),
        "{r:?}"
    );
    let _ = std::fs::remove_dir_all(d);
}

/// A 32-bit float WAV (WAVE_FORMAT_IEEE_FLOAT) of `samples`, mono.
fn write_f32_wav(path: &Path, samples: &[f32], rate: u32) {
    let data_len = (samples.len() * 4) as u32;
    let mut b = Vec::with_capacity(44 + data_len as usize);
    b.extend_from_slice(b"RIFF");
    b.extend_from_slice(&(36 + data_len).to_le_bytes());
    b.extend_from_slice(b"WAVEfmt ");
    b.extend_from_slice(&16u32.to_le_bytes());
    b.extend_from_slice(&3u16.to_le_bytes()); // IEEE float
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&rate.to_le_bytes());
    b.extend_from_slice(&(rate * 4).to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&32u16.to_le_bytes());
    b.extend_from_slice(b"data");
    b.extend_from_slice(&data_len.to_le_bytes());
    for s in samples {
        b.extend_from_slice(&s.to_le_bytes());
    }
    std::fs::write(path, b).unwrap();
}

#[test]
fn nan_and_infinite_float_samples_are_lost_audio_not_a_panic() {
    let d = tmpdir("nan");
    let rate = 44100;
    let mut ep = synth_bed(BedKind::Speech, 3.0, 91, rate);
    // A few bad samples: replaced by silence, noted, the rest decodes.
    ep[1000] = f32::NAN;
    ep[2000] = f32::INFINITY;
    ep[3000] = f32::NEG_INFINITY;
    let few = d.join("few.wav");
    write_f32_wav(&few, &ep, rate);
    let dec = decode_file(&few).unwrap_or_else(|e| panic!("{e}"));
    assert!(dec.samples.iter().all(|s| s.is_finite()));
    assert!((dec.duration_s - 3.0).abs() < 0.001, "{}", dec.duration_s);
    assert!(
        dec.warnings.iter().any(|w| w.contains("NaN or infinite")),
        "{:?}",
        dec.warnings
    );
    // A second of them is more than the lost-audio allowance: a readable failure.
    for s in &mut ep[rate as usize..2 * rate as usize] {
        *s = f32::NAN;
    }
    let many = d.join("many.wav");
    write_f32_wav(&many, &ep, rate);
    match decode_file(&many) {
        Err(e @ DecodeError::Incomplete { .. }) => {
            assert!(e.to_string().contains("NaN or infinite"), "{e}")
        }
        other => panic!("expected Incomplete, got {other:?}"),
    }
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn flac_with_trailing_bytes_decodes_its_declared_length() {
    if !tool_available("flac") {
        eprintln!("flac not installed: test skipped (scripts/matcher-deps.sh installs it)");
        return;
    }
    let d = tmpdir("flactail");
    let rate = 8000;
    // Four 4096-sample frames and a short last one of 200 (25 ms: within the loose
    // duration tolerance, so only the exact count notices it missing).
    let mut ep = synth_bed(BedKind::Speech, 3.0, 93, rate);
    ep.truncate(4 * 4096 + 200);
    let wav = d.join("ep.wav");
    write_wav(&wav, &ep, rate, 1).unwrap();
    let flac = d.join("ep.flac");
    let st = std::process::Command::new("flac")
        .args(["-s", "-f", "-o"])
        .arg(&flac)
        .arg(&wav)
        .status()
        .unwrap();
    assert!(st.success());
    let body = std::fs::read(&flac).unwrap();
    // Junk, and an ID3v2 tag, after the last frame.
    let mut junk = body.clone();
    junk.extend((0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
    let mut tagged = body.clone();
    tagged.extend_from_slice(b"ID3\x03\x00\x00\x00\x00\x01\x00");
    tagged.extend(std::iter::repeat_n(0u8, 128));
    for (name, bytes) in [("junk.flac", junk), ("tag.flac", tagged)] {
        let p = d.join(name);
        std::fs::write(&p, bytes).unwrap();
        // Every declared frame decoded (the last one found by its CRC), the bytes after
        // it ignored with a warning. (Before: "incomplete", the last frame lost.)
        let dec = decode_file(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(dec.samples.len(), 4 * 4096 + 200, "{name}");
        assert!(
            dec.warnings.iter().any(|w| w.contains("not FLAC")),
            "{name}: {:?}",
            dec.warnings
        );
    }
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn mp3_with_crc_frames_or_without_a_tag_keeps_offsets() {
    if !tool_available("lame") {
        eprintln!("lame not installed: MP3 test skipped (scripts/matcher-deps.sh installs it)");
        return;
    }
    let d = tmpdir("mp3crc");
    let (e, c) = episode_44k(&d, 6.5, 1);
    // `-p`: CRC-protected frames (the LAME tag two bytes later); `-t`: no tag at all.
    for (name, flag, tol) in [("crc.mp3", "-p", 0.005), ("notag.mp3", "-t", 0.005)] {
        let mp3 = d.join(name);
        let out = std::process::Command::new("lame")
            .args(["--quiet", "-q", "7", "-b", "64", "-m", "m", flag])
            .arg(&e)
            .arg(&mp3)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let off = offset_of(&mp3, &c);
        assert!((off - 6.5).abs() <= tol, "{name}: offset {off}, true 6.5");
    }
    let _ = std::fs::remove_dir_all(d);
}
