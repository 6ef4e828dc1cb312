//! Undoing a body's `Content-Encoding` as it streams in, done here rather than by
//! reqwest's `gzip`/`deflate` features because those refuse what real servers send for
//! whole media: `x-gzip` (the old name RFC 9110 says to read as gzip) and gzip bodies of
//! several members (`cat a.gz b.gz`, valid gzip; reqwest's decoder stops after the first
//! member and the rest was reported as a truncated body). flate2, the well-kept crate
//! reqwest's own decoders build on, decodes every member ([`flate2::write::MultiGzDecoder`])
//! and checks each member's CRC and length, so a compressed body cut short is caught
//! even when nothing else declares its length.

use std::io::Write;

use flate2::write::{MultiGzDecoder, ZlibDecoder};

/// What a body's `Content-Encoding` asks for.
pub enum BodyDecoder {
    /// No encoding (absent or `identity`): the bytes are the media.
    Identity,
    /// gzip or x-gzip, any number of members.
    Gzip(MultiGzDecoder<Vec<u8>>),
    /// HTTP's `deflate`: zlib-wrapped deflate (RFC 9110 8.4.1.2).
    Deflate(ZlibDecoder<Vec<u8>>),
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
            [one] if one == "deflate" => Ok(BodyDecoder::Deflate(ZlibDecoder::new(Vec::new()))),
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
            BodyDecoder::Deflate(d) => {
                d.write_all(wire)?;
                Ok(std::mem::take(d.get_mut()))
            }
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
            BodyDecoder::Deflate(d) => {
                d.try_finish()?;
                Ok(std::mem::take(d.get_mut()))
            }
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
