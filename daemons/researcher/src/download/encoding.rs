//! Undoing a body's `Content-Encoding` as it streams in, done here rather than by
//! reqwest's `gzip`/`deflate` features because those refuse what real servers send for
//! whole media: `x-gzip` (the old name RFC 9110 says to read as gzip) and gzip bodies of
//! several members (`cat a.gz b.gz`, valid gzip; reqwest's decoder stops after the first
//! member and the rest was reported as a truncated body). flate2, the well-kept crate
//! reqwest's own decoders build on, decodes every member ([`flate2::write::MultiGzDecoder`])
//! and checks each member's CRC and length, so a compressed body cut short is caught
//! even when nothing else declares its length.
//!
//! HTTP's `deflate` is zlib-wrapped, but several servers send raw deflate (RFC 1951)
//! under that name, and browsers accept both: the first two bytes tell them apart (a
//! zlib header's check bits). Bytes that begin like an audio file are not deflate at
//! all (a server labelling plain media), and raw deflate would read almost anything
//! as compressed data: those fail at once as not so encoded.

use std::io::Write;

use flate2::write::{DeflateDecoder, MultiGzDecoder, ZlibDecoder};

/// What a body's `Content-Encoding` asks for.
pub enum BodyDecoder {
    /// No encoding (absent or `identity`): the bytes are the media.
    Identity,
    /// gzip or x-gzip, any number of members.
    Gzip(MultiGzDecoder<Vec<u8>>),
    /// HTTP's `deflate`: zlib-wrapped (RFC 9110 8.4.1.2) or raw, told by its first bytes.
    Deflate(Deflate),
}

/// A `deflate` body: its first two bytes are awaited to tell zlib from raw deflate.
pub enum Deflate {
    /// Fewer than two bytes seen.
    Sniffing(Vec<u8>),
    /// zlib-wrapped deflate (a valid zlib header).
    Zlib(ZlibDecoder<Vec<u8>>),
    /// Raw deflate, as some servers send it.
    Raw(DeflateDecoder<Vec<u8>>),
}

/// Audio files' first bytes, named: a body labelled `deflate` that starts so is not
/// compressed.
fn audio_magic(head: &[u8]) -> Option<&'static str> {
    match head {
        h if h.starts_with(b"RIFF") => Some("a WAV file"),
        h if h.starts_with(b"ID3") => Some("an MP3 file (ID3 tag)"),
        h if h.starts_with(b"OggS") => Some("an Ogg file"),
        h if h.starts_with(b"fLaC") => Some("a FLAC file"),
        h if h.get(4..8) == Some(b"ftyp".as_slice()) => Some("an MP4 file"),
        [0xff, b, ..] if b & 0xe0 == 0xe0 => Some("MPEG audio or ADTS frames"),
        _ => None,
    }
}

impl Deflate {
    fn write(&mut self, wire: &[u8]) -> std::io::Result<Vec<u8>> {
        if let Deflate::Sniffing(seen) = self {
            seen.extend_from_slice(wire);
            if seen.len() < 8 {
                return Ok(Vec::new());
            }
            let seen = std::mem::take(seen);
            self.choose(&seen)?;
            return self.write(&seen);
        }
        match self {
            Deflate::Zlib(d) => {
                d.write_all(wire)?;
                Ok(std::mem::take(d.get_mut()))
            }
            Deflate::Raw(d) => {
                d.write_all(wire)?;
                Ok(std::mem::take(d.get_mut()))
            }
            Deflate::Sniffing(_) => Ok(Vec::new()),
        }
    }

    /// Picks zlib or raw from the body's first bytes; `Err` when they begin an audio file.
    fn choose(&mut self, head: &[u8]) -> std::io::Result<()> {
        if let Some(what) = audio_magic(head) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("it is not deflate data: it starts like {what}"),
            ));
        }
        let zlib = head.len() >= 2
            && head[0] & 0x0f == 8
            && head[0] >> 4 <= 7
            && (u16::from(head[0]) << 8 | u16::from(head[1])) % 31 == 0;
        *self = if zlib {
            Deflate::Zlib(ZlibDecoder::new(Vec::new()))
        } else {
            Deflate::Raw(DeflateDecoder::new(Vec::new()))
        };
        Ok(())
    }

    fn finish(&mut self) -> std::io::Result<Vec<u8>> {
        if let Deflate::Sniffing(seen) = self {
            let seen = std::mem::take(seen);
            self.choose(&seen)?;
            let mut out = self.write(&seen)?;
            out.extend(self.finish()?);
            return Ok(out);
        }
        match self {
            Deflate::Zlib(d) => {
                d.try_finish()?;
                Ok(std::mem::take(d.get_mut()))
            }
            Deflate::Raw(d) => {
                d.try_finish()?;
                Ok(std::mem::take(d.get_mut()))
            }
            Deflate::Sniffing(_) => Ok(Vec::new()),
        }
    }
}

impl BodyDecoder {
    /// The decoder for a `Content-Encoding` header value; `Err` with the encoding when
    /// it is not one this build undoes (`br`, `zstd`, stacked encodings).
    pub fn for_header(value: Option<&str>) -> Result<BodyDecoder, String> {
        let codings: Vec<String> = value
            .unwrap_or("")
            .split(',')
            .map(|c| c.trim().to_ascii_lowercase())
            .filter(|c| !c.is_empty() && c != "identity")
            .collect();
        match codings.as_slice() {
            [] => Ok(BodyDecoder::Identity),
            [one] if one == "gzip" || one == "x-gzip" => {
                Ok(BodyDecoder::Gzip(MultiGzDecoder::new(Vec::new())))
            }
            [one] if one == "deflate" => Ok(BodyDecoder::Deflate(Deflate::Sniffing(Vec::new()))),
            _ => Err(value.unwrap_or("").trim().to_string()),
        }
    }

    /// Feeds bytes as they arrived; returns the media bytes they decoded to.
    ///
    /// # Errors
    /// The decoder's error when the bytes are not of the encoding.
    pub fn feed(&mut self, wire: &[u8]) -> std::io::Result<Vec<u8>> {
        match self {
            BodyDecoder::Identity => Ok(wire.to_vec()),
            BodyDecoder::Gzip(d) => {
                d.write_all(wire)?;
                Ok(std::mem::take(d.get_mut()))
            }
            BodyDecoder::Deflate(d) => d.write(wire),
        }
    }

    /// Ends the body: the last media bytes.
    ///
    /// # Errors
    /// When the encoded stream is not whole (a gzip member without its trailer, a CRC
    /// or length that does not match).
    pub fn finish(&mut self) -> std::io::Result<Vec<u8>> {
        match self {
            BodyDecoder::Identity => Ok(Vec::new()),
            BodyDecoder::Gzip(d) => {
                d.try_finish()?;
                Ok(std::mem::take(d.get_mut()))
            }
            BodyDecoder::Deflate(d) => d.finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::GzEncoder;
    use flate2::Compression;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::default());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    fn decode(header: &str, wire: &[u8]) -> std::io::Result<Vec<u8>> {
        let mut d = BodyDecoder::for_header(Some(header)).unwrap();
        let mut out = Vec::new();
        for piece in wire.chunks(7) {
            out.extend(d.feed(piece)?);
        }
        out.extend(d.finish()?);
        Ok(out)
    }

    #[test]
    fn every_member_of_gzip_and_x_gzip_is_decoded() {
        let wire = [gzip(b"first half, "), gzip(b"second half")].concat();
        assert_eq!(decode("gzip", &wire).unwrap(), b"first half, second half");
        assert_eq!(decode("X-Gzip", &wire).unwrap(), b"first half, second half");
    }

    #[test]
    fn a_gzip_body_cut_short_or_not_gzip_is_an_error() {
        let wire = gzip(&[7u8; 5000]);
        assert!(decode("gzip", &wire[..wire.len() - 3]).is_err());
        assert!(decode("gzip", b"RIFF....WAVEfmt ").is_err());
    }

    #[test]
    fn deflate_is_read_with_or_without_its_zlib_wrapper_and_plain_media_is_refused() {
        let media: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), Compression::default());
        z.write_all(&media).unwrap();
        let zlib = z.finish().unwrap();
        let mut r = flate2::write::DeflateEncoder::new(Vec::new(), Compression::default());
        r.write_all(&media).unwrap();
        let raw = r.finish().unwrap();
        assert_eq!(decode("deflate", &zlib).unwrap(), media);
        assert_eq!(decode("DEFLATE", &raw).unwrap(), media);
        let mut wav = b"RIFF\x24\x00\x00\x00WAVEfmt ".to_vec();
        wav.extend_from_slice(&media);
        let e = decode("deflate", &wav).unwrap_err().to_string();
        assert!(e.contains("it starts like a WAV file"), "{e}");
        // An empty body is no deflate stream either.
        assert!(decode("deflate", b"").is_err());
    }

    #[test]
    fn unknown_encodings_are_named() {
        assert!(matches!(
            BodyDecoder::for_header(Some(" identity ")),
            Ok(BodyDecoder::Identity)
        ));
        assert_eq!(
            BodyDecoder::for_header(Some("br")).err().as_deref(),
            Some("br")
        );
        assert!(BodyDecoder::for_header(Some("gzip, br")).is_err());
    }
}
