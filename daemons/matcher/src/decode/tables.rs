//! An MP4's sample tables checked against their own box sizes before symphonia reads
//! them: its reader allocates room for as many entries as a table's count says before
//! reading one (an entry count of 0xFFFFFFFF asks for up to 32 GiB in a 170 kB file; a process under
//! a memory limit aborted, taking the daemon's other jobs with it).
//! A count whose entries cannot fit in the box, or a sample larger than the whole file
//! (the reader allocates each sample's stated size: 0xFFFFFFFF as the first `stsz`
//! entry asked for 4 GiB), is a damaged or hostile file: refused naming the box.

use super::mp4::{be_u32, boxes, child};

/// Each table: (box, bytes before its entries (full-box header, count), bytes per entry).
/// `stsz` with a fixed sample size (its first field not 0) has no entries.
const TABLES: [(&[u8; 4], usize, usize); 6] = [
    (b"stts", 8, 8),
    (b"stsc", 8, 12),
    (b"stsz", 12, 4),
    (b"stco", 8, 4),
    (b"co64", 8, 8),
    (b"ctts", 8, 8),
];

/// Checks every track's tables; a sample may not be larger than the file (`len` bytes).
/// Why a sample table of `moov` (of a file of `len` bytes) cannot hold what its count
/// says, if one cannot.
pub(super) fn check_moov(moov: &[u8], len: u64) -> Result<(), String> {
    for (track, (_, trak)) in boxes(moov).filter(|(k, _)| k == b"trak").enumerate() {
        let Some(stbl) = child(trak, b"mdia")
            .and_then(|m| child(m, b"minf"))
            .and_then(|m| child(m, b"stbl"))
        else {
            continue;
        };
        for (kind, body) in boxes(stbl) {
            let Some(&(name, head, entry)) = TABLES.iter().find(|(k, ..)| **k == kind) else {
                continue;
            };
            let fixed_size = be_u32(body.get(4..).unwrap_or_default()).unwrap_or(0);
            if name == b"stsz" && fixed_size != 0 {
                // One size for every sample: no table, but the reader allocates it per sample.
                if u64::from(fixed_size) > len {
                    return Err(too_large(track, fixed_size, 0, len));
                }
                continue;
            }
            let Some(count) = be_u32(body.get(head - 4..).unwrap_or_default()) else {
                return Err(format!(
                    "its MP4 sample table `{}` of track {} is {} bytes, too short for its own header: a damaged file",
                    String::from_utf8_lossy(name),
                    track + 1,
                    body.len() + 8
                ));
            };
            let room = body.len().saturating_sub(head) as u64;
            if u64::from(count) * entry as u64 > room {
                return Err(format!(
                    "its MP4 sample table `{}` of track {} counts {count} entries of {entry} bytes, but its box holds {room} bytes of entries: a damaged or hostile count (the reader would allocate {} bytes for it)",
                    String::from_utf8_lossy(name),
                    track + 1,
                    u64::from(count) * entry as u64
                ));
            }
            if name == b"stsz" {
                // The reader allocates each sample's size when it reads it.
                let sizes = body
                    .get(head..head + count as usize * 4)
                    .unwrap_or_default();
                let largest = sizes
                    .chunks_exact(4)
                    .enumerate()
                    .filter_map(|(i, c)| be_u32(c).map(|s| (s, i)))
                    .max();
                if let Some((size, sample)) = largest.filter(|(s, _)| u64::from(*s) > len) {
                    return Err(too_large(track, size, sample, len));
                }
            }
        }
    }
    Ok(())
}

fn too_large(track: usize, size: u32, sample: usize, len: u64) -> String {
    format!(
        "its MP4 sample size table `stsz` of track {} gives sample {} a size of {size} bytes in a file of {len}: a damaged or hostile size (the reader would allocate it)",
        track + 1,
        sample + 1
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bx(kind: &[u8; 4], body: &[u8]) -> Vec<u8> {
        let mut v = ((body.len() + 8) as u32).to_be_bytes().to_vec();
        v.extend_from_slice(kind);
        v.extend_from_slice(body);
        v
    }

    fn moov_with_stsz(count: u32, entries: usize) -> Vec<u8> {
        let mut stsz = vec![0u8; 8];
        stsz.extend_from_slice(&count.to_be_bytes());
        stsz.extend(std::iter::repeat_n(0u8, entries * 4));
        let stbl = bx(b"stbl", &bx(b"stsz", &stsz));
        bx(b"trak", &bx(b"mdia", &bx(b"minf", &stbl)))
    }

    #[test]
    fn a_count_that_fits_passes_and_one_that_does_not_is_named() {
        assert_eq!(check_moov(&moov_with_stsz(3, 3), 1000), Ok(()));
        let err = check_moov(&moov_with_stsz(u32::MAX, 3), 1000).unwrap_err();
        assert!(err.contains("`stsz` of track 1 counts 4294967295"), "{err}");
    }
}
