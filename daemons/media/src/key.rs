//! The name of a stored object: the sha256 of its bytes, lowercase hex.

use std::fmt;
use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::MediaError;

/// A content address: 64 lowercase hex digits. Checked when made, so a key can be used
/// as a file or object name as it is (no path separators, no dots).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key(String);

impl Key {
    /// Parses a sha256 in lowercase hex.
    ///
    /// # Errors
    /// [`MediaError::BadKey`] for anything else.
    pub fn parse(text: &str) -> Result<Key, MediaError> {
        if text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            Ok(Key(text.to_string()))
        } else {
            Err(MediaError::BadKey(text.to_string()))
        }
    }

    /// The hex text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The sha256 of a file's bytes and its size, read in 1 MiB pieces (blocking: run it on
/// a blocking thread).
///
/// # Errors
/// The file cannot be read.
pub fn hash_file(path: &Path) -> Result<(Key, u64), MediaError> {
    let mut file = std::fs::File::open(path).map_err(|e| MediaError::io(path, "opening", e))?;
    copy_hashing(&mut file, path, None)
}

/// Reads `from` (named `path` in errors) to its end in 1 MiB pieces, writing each piece
/// to `to` if given, and returns the sha256 and size of what was read: with `to`, the
/// bytes written are exactly the bytes hashed (one read, no window between the two).
/// Blocking.
///
/// # Errors
/// A read or a write failing.
pub(crate) fn copy_hashing(
    from: &mut impl Read,
    path: &Path,
    mut to: Option<(&mut std::fs::File, &Path)>,
) -> Result<(Key, u64), MediaError> {
    use std::io::Write;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(MediaError::io(path, "reading", e)),
        };
        if n == 0 {
            break;
        }
        size += n as u64;
        hasher.update(&buf[..n]);
        if let Some((file, name)) = to.as_mut() {
            file.write_all(&buf[..n])
                .map_err(|e| MediaError::io(name, "writing", e))?;
        }
    }
    let hex: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok((Key(hex), size))
}

/// sha256 of bytes fed piece by piece (a stream from a remote store), giving a [`Key`].
#[derive(Debug, Default)]
pub(crate) struct KeyHasher(Sha256);

impl KeyHasher {
    /// Adds bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The key of everything fed.
    pub fn finish(self) -> Key {
        Key(self
            .0
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sha256_hex_is_a_key() {
        let good = "a".repeat(64);
        assert_eq!(Key::parse(&good).unwrap().as_str(), good);
        for bad in [
            "",
            "abc",
            &"A".repeat(64),
            &"g".repeat(64),
            &format!("../{}", "a".repeat(61)),
            &"a".repeat(65),
        ] {
            assert!(Key::parse(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
