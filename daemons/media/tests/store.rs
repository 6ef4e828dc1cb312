//! The local store through `MediaStore`: content addressing, verification on read,
//! least-recently-used eviction by size, crash left-overs, and the counts.

use std::path::Path;
use std::time::{Duration, SystemTime};

use archivist_media::{hash_file, Key, Lookup, MediaError, MediaStore};

fn write(dir: &Path, name: &str, bytes: &[u8]) -> (std::path::PathBuf, Key) {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    let (key, _) = hash_file(&path).unwrap();
    (path, key)
}

/// Opens `path` and holds an exclusive `flock` on it, as a writer in flight does (the
/// lock goes with the returned file).
fn hold_as_writer(path: &Path) -> std::fs::File {
    use std::os::fd::AsRawFd;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    // SAFETY: flock on a descriptor the returned File owns.
    let done = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    assert_eq!(done, 0, "cannot lock {}", path.display());
    f
}

/// Sets an object's last use back, as if it had been used `ago` before now.
fn age(path: &Path, ago: Duration) {
    let f = std::fs::File::open(path).unwrap();
    f.set_modified(SystemTime::now() - ago).unwrap();
}

#[tokio::test]
async fn put_then_get_is_a_verified_hit_and_unknown_keys_miss() {
    let tmp = tempfile::tempdir().unwrap();
    let store = MediaStore::local(tmp.path().join("media"), 1 << 20).unwrap();
    let (src, key) = write(tmp.path(), "a.wav", b"episode one bytes");
    let written = store.put(&key, &src).await.unwrap();
    assert!(written.stored && written.evicted.is_empty());
    // The object is named by its hash, in the store's directory.
    assert!(tmp.path().join("media").join(key.as_str()).is_file());
    let dest = tmp.path().join("out").join("e.media");
    assert_eq!(
        store.get(&key, &dest).await.unwrap(),
        Lookup::Hit { bytes: 17 }
    );
    assert_eq!(std::fs::read(&dest).unwrap(), b"episode one bytes");
    let other = Key::parse(&"0".repeat(64)).unwrap();
    assert_eq!(store.get(&other, &dest).await.unwrap(), Lookup::Miss);
    let s = store.stats();
    assert_eq!(
        (s.hits, s.misses, s.bytes_read, s.bytes_written),
        (1, 1, 17, 17)
    );
}

#[tokio::test]
async fn a_file_that_does_not_hash_to_its_key_is_not_stored() {
    let tmp = tempfile::tempdir().unwrap();
    let store = MediaStore::local(tmp.path().join("media"), 1 << 20).unwrap();
    let (src, _) = write(tmp.path(), "a.wav", b"the real bytes");
    let wrong = Key::parse(&"a".repeat(64)).unwrap();
    let err = store.put(&wrong, &src).await.unwrap_err();
    assert!(matches!(err, MediaError::WrongContent { .. }), "{err}");
    assert!(!store.contains(&wrong).await.unwrap());
}

#[tokio::test]
async fn a_damaged_object_is_a_miss_that_deletes_it_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let store = MediaStore::local(tmp.path().join("media"), 1 << 20).unwrap();
    let (src, key) = write(tmp.path(), "a.wav", &[7u8; 4096]);
    store.put(&key, &src).await.unwrap();
    // One flipped byte on disk.
    let object = tmp.path().join("media").join(key.as_str());
    let mut bytes = std::fs::read(&object).unwrap();
    bytes[100] ^= 1;
    std::fs::write(&object, &bytes).unwrap();
    let dest = tmp.path().join("e.media");
    match store.get(&key, &dest).await.unwrap() {
        Lookup::Corrupt { actual, bytes } => {
            assert_ne!(actual, key.as_str());
            assert_eq!(bytes, 4096);
        }
        other => panic!("a damaged object was {other:?}"),
    }
    assert!(!object.exists(), "the damaged object was kept");
    assert!(!dest.exists(), "the damaged bytes were handed out");
    // A truncated object too.
    store.put(&key, &src).await.unwrap();
    std::fs::write(&object, [7u8; 100]).unwrap();
    assert!(matches!(
        store.get(&key, &dest).await.unwrap(),
        Lookup::Corrupt { bytes: 100, .. }
    ));
    let s = store.stats();
    assert_eq!((s.hits, s.misses, s.verify_failures), (0, 2, 2));
    // Stored again, it is a hit.
    store.put(&key, &src).await.unwrap();
    assert_eq!(
        store.get(&key, &dest).await.unwrap(),
        Lookup::Hit { bytes: 4096 }
    );
}

#[tokio::test]
async fn the_least_recently_used_objects_are_evicted_to_stay_within_the_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("media");
    // Room for three 1000-byte objects.
    let store = MediaStore::local(&dir, 3000).unwrap();
    let mut keys = Vec::new();
    for (i, ago) in [(0u8, 40u64), (1, 30), (2, 20)] {
        let (src, key) = write(tmp.path(), &format!("{i}.wav"), &[i; 1000]);
        store.put(&key, &src).await.unwrap();
        age(&dir.join(key.as_str()), Duration::from_secs(ago));
        keys.push(key);
    }
    // Reading the oldest makes it the most recently used.
    let dest = tmp.path().join("e.media");
    assert!(matches!(
        store.get(&keys[0], &dest).await.unwrap(),
        Lookup::Hit { .. }
    ));
    let (src, newest) = write(tmp.path(), "3.wav", &[3u8; 1000]);
    let written = store.put(&newest, &src).await.unwrap();
    // Object 1 is now the least recently used: it goes, and only it.
    assert_eq!(written.evicted, vec![(keys[1].clone(), 1000)]);
    assert!(store.contains(&keys[0]).await.unwrap());
    assert!(!store.contains(&keys[1]).await.unwrap());
    assert!(store.contains(&keys[2]).await.unwrap());
    assert!(store.contains(&newest).await.unwrap());
    assert_eq!(store.stored_bytes().await.unwrap(), Some(3000));
    let s = store.stats();
    assert_eq!((s.evictions, s.evicted_bytes), (1, 1000));
    // The order is on disk: a store opened again (a restart) evicts the same way.
    let again = MediaStore::local(&dir, 3000).unwrap();
    age(&dir.join(keys[2].as_str()), Duration::from_secs(100));
    let (src, fifth) = write(tmp.path(), "4.wav", &[4u8; 1000]);
    let written = again.put(&fifth, &src).await.unwrap();
    assert_eq!(written.evicted, vec![(keys[2].clone(), 1000)]);
}

/// Outside 23b M4: an object stamped with a future last use (a restored backup, a clock
/// stepped back) was never evicted, while the objects in use evicted each other on every
/// write. It is used before the step, so older than any use since: it goes first.
#[tokio::test]
async fn an_object_last_used_in_the_future_is_evicted_before_the_objects_in_use() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("media");
    // Room for two 1000-byte objects.
    let store = MediaStore::local(&dir, 2000).unwrap();
    let (a_src, stale) = write(tmp.path(), "a.wav", &[1u8; 1000]);
    let (b_src, in_use) = write(tmp.path(), "b.wav", &[2u8; 1000]);
    store.put(&stale, &a_src).await.unwrap();
    store.put(&in_use, &b_src).await.unwrap();
    let future = SystemTime::now() + Duration::from_secs(4 * 365 * 24 * 3600);
    std::fs::File::open(dir.join(stale.as_str()))
        .unwrap()
        .set_modified(future)
        .unwrap();
    age(&dir.join(in_use.as_str()), Duration::from_secs(10));
    let (c_src, newest) = write(tmp.path(), "c.wav", &[3u8; 1000]);
    let written = store.put(&newest, &c_src).await.unwrap();
    assert_eq!(written.evicted, vec![(stale.clone(), 1000)]);
    assert!(store.contains(&in_use).await.unwrap());
    assert!(store.contains(&newest).await.unwrap());
}

#[tokio::test]
async fn an_object_larger_than_the_store_is_not_kept_and_evicts_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let store = MediaStore::local(tmp.path().join("media"), 1500).unwrap();
    let (src, small) = write(tmp.path(), "s.wav", &[1u8; 1000]);
    store.put(&small, &src).await.unwrap();
    let (src, big) = write(tmp.path(), "b.wav", &[2u8; 2000]);
    let written = store.put(&big, &src).await.unwrap();
    assert!(!written.stored && written.evicted.is_empty());
    assert!(!store.contains(&big).await.unwrap());
    assert!(store.contains(&small).await.unwrap());
}

#[tokio::test]
async fn a_read_survives_the_object_being_evicted_meanwhile() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("media");
    let store = MediaStore::local(&dir, 1000).unwrap();
    let (src, first) = write(tmp.path(), "1.wav", &[1u8; 1000]);
    store.put(&first, &src).await.unwrap();
    let dest = tmp.path().join("job.media");
    assert!(matches!(
        store.get(&first, &dest).await.unwrap(),
        Lookup::Hit { .. }
    ));
    let (src, second) = write(tmp.path(), "2.wav", &[2u8; 1000]);
    let written = store.put(&second, &src).await.unwrap();
    assert_eq!(written.evicted, vec![(first.clone(), 1000)]);
    // The job's copy is intact.
    assert_eq!(std::fs::read(&dest).unwrap(), vec![1u8; 1000]);
}

#[tokio::test]
async fn temporary_files_left_by_a_crash_are_removed_and_never_read_as_objects() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("media");
    std::fs::create_dir_all(&dir).unwrap();
    let key = Key::parse(&"c".repeat(64)).unwrap();
    // A write that crashed before its rename: only the temporary file exists.
    let stale = dir.join(format!(".{key}.0000000000000001.tmp"));
    std::fs::write(&stale, b"half an episode").unwrap();
    age(&stale, Duration::from_secs(7200));
    // A crash a moment ago: young, but no writer holds it.
    let young = dir.join(format!(".{key}.0000000000000003.tmp"));
    std::fs::write(&young, b"a crash a second ago").unwrap();
    // Another process's write in flight: its writer holds the file's lock.
    let fresh = dir.join(format!(".{key}.0000000000000002.tmp"));
    std::fs::write(&fresh, b"a write in flight").unwrap();
    let _writer = hold_as_writer(&fresh);
    let store = MediaStore::local(&dir, 1 << 20).unwrap();
    assert!(!stale.exists(), "a crash's temporary file was kept");
    assert!(!young.exists(), "a young crash's temporary file was kept");
    assert!(
        fresh.exists(),
        "another process's write in flight was removed"
    );
    assert_eq!(
        store.get(&key, &tmp.path().join("e")).await.unwrap(),
        Lookup::Miss
    );
    assert_eq!(store.stored_bytes().await.unwrap(), Some(0));
}

/// Writes `bytes` into the file at `path` in place: the same inode, as `dd
/// conv=notrunc`, `cp` onto an existing file or `rsync --inplace` do.
fn overwrite_in_place(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
    f.sync_all().unwrap();
}

#[tokio::test]
async fn a_read_is_a_private_copy_that_an_in_place_write_into_the_object_does_not_change() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("media");
    let store = MediaStore::local(&dir, 1 << 20).unwrap();
    let (src, key) = write(tmp.path(), "1.wav", &[1u8; 4096]);
    store.put(&key, &src).await.unwrap();
    let dest = tmp.path().join("job.media");
    assert_eq!(
        store.get(&key, &dest).await.unwrap(),
        Lookup::Hit { bytes: 4096 }
    );
    // The job holds its audio; someone writes other audio into the object in place.
    let object = dir.join(key.as_str());
    let inode = |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
    let before = inode(&object);
    overwrite_in_place(&object, &[2u8; 4096]);
    assert_eq!(inode(&object), before, "not an in-place write");
    // The job's bytes are still the bytes that were hashed.
    assert_eq!(
        hash_file(&dest).unwrap().0,
        key,
        "the job's audio changed after its hash check"
    );
    assert_eq!(std::fs::read(&dest).unwrap(), vec![1u8; 4096]);
    // The next read finds the changed object: deleted, counted, a miss.
    assert!(matches!(
        store.get(&key, &dest).await.unwrap(),
        Lookup::Corrupt { bytes: 4096, .. }
    ));
    assert!(!object.exists());
    assert_eq!(store.stats().verify_failures, 1);
}

#[tokio::test]
async fn a_name_that_holds_no_regular_file_is_removed_counted_and_healed_by_the_next_write() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("media");
    let store = MediaStore::local(&dir, 1 << 20).unwrap();
    let (src1, k1) = write(tmp.path(), "1.wav", &[1u8; 1000]);
    let (src2, k2) = write(tmp.path(), "2.wav", &[2u8; 1000]);
    let (src3, k3) = write(tmp.path(), "3.wav", &[3u8; 1000]);
    store.put(&k1, &src1).await.unwrap();
    // A directory (with something in it), a relative symbolic link to a sibling object
    // (a restore with `cp -as`) and a dangling one, where objects belong.
    std::fs::create_dir_all(dir.join(k2.as_str()).join("inner")).unwrap();
    std::os::unix::fs::symlink(k1.as_str(), dir.join(k3.as_str())).unwrap();
    let dangling = Key::parse(&"d".repeat(64)).unwrap();
    std::os::unix::fs::symlink("nowhere", dir.join(dangling.as_str())).unwrap();
    let dest = tmp.path().join("job.media");
    for (key, what) in [
        (&k2, "a directory"),
        (&k3, "a symbolic link"),
        (&dangling, "a symbolic link"),
    ] {
        assert_eq!(
            store.get(key, &dest).await.unwrap(),
            Lookup::NotAnObject { what: what.into() },
            "{key}"
        );
        assert!(
            std::fs::symlink_metadata(dir.join(key.as_str())).is_err(),
            "{what} was left in the store"
        );
    }
    assert!(!dest.exists(), "something was handed out");
    // The link's target is untouched.
    assert!(store.contains(&k1).await.unwrap());
    let s = store.stats();
    assert_eq!((s.hits, s.misses, s.verify_failures), (0, 3, 3));
    // The fresh downloads are stored; written bytes count only real writes.
    std::fs::create_dir_all(dir.join(k2.as_str())).unwrap();
    let w = store.put(&k2, &src2).await.unwrap();
    assert!(w.stored && w.bytes == 1000, "{w:?}");
    store.put(&k3, &src3).await.unwrap();
    let again = store.put(&k1, &src1).await.unwrap();
    assert_eq!(again.bytes, 0, "an object already held counted as written");
    assert_eq!(store.stats().bytes_written, 3000);
    for k in [&k2, &k3] {
        assert_eq!(
            store.get(k, &dest).await.unwrap(),
            Lookup::Hit { bytes: 1000 }
        );
    }
}

#[tokio::test]
async fn temporary_files_count_against_the_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("media");
    // Room for two 1000-byte objects.
    let store = MediaStore::local(&dir, 2000).unwrap();
    let (src1, k1) = write(tmp.path(), "1.wav", &[1u8; 1000]);
    store.put(&k1, &src1).await.unwrap();
    age(&dir.join(k1.as_str()), Duration::from_secs(10));
    // A write in flight (another process, holding its lock) and a crash's left-over
    // (no one holds it, however young).
    let fresh = dir.join(format!(".{}.0000000000000001.tmp", "e".repeat(64)));
    std::fs::write(&fresh, [9u8; 600]).unwrap();
    let _writer = hold_as_writer(&fresh);
    let stale = dir.join(format!(".{}.0000000000000002.tmp", "f".repeat(64)));
    std::fs::write(&stale, [9u8; 900]).unwrap();
    let (src2, k2) = write(tmp.path(), "2.wav", &[2u8; 1000]);
    let written = store.put(&k2, &src2).await.unwrap();
    // 1000 + 1000 + 600 > 2000: the least recently used object goes; the crash's
    // temporary file is removed; the one in flight stays.
    assert_eq!(written.evicted, vec![(k1.clone(), 1000)]);
    assert!(!stale.exists(), "a crash's temporary file outlived a write");
    assert!(fresh.exists(), "a write in flight was removed");
    let total: u64 = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(
        total <= 2000,
        "the store holds {total} bytes, over its bound"
    );
}

#[tokio::test]
async fn a_write_that_fails_is_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("media");
    let store = MediaStore::local(&dir, 1 << 20).unwrap();
    // The directory replaced by a file: nothing can be written into it.
    std::fs::remove_dir(&dir).unwrap();
    std::fs::write(&dir, b"not a directory").unwrap();
    let (src, key) = write(tmp.path(), "1.wav", &[1u8; 1000]);
    let err = store.put(&key, &src).await.unwrap_err();
    assert!(matches!(err, MediaError::Io { .. }), "{err}");
    let s = store.stats();
    assert_eq!((s.write_failures, s.bytes_written), (1, 0));
}

/// A tmpfs of `kib` KiB at a new directory, or `None` when this process may not mount
/// (not root): the full-file-system test needs a real full file system.
fn small_fs(kib: u64) -> Option<(tempfile::TempDir, std::path::PathBuf)> {
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("fs");
    std::fs::create_dir_all(&mnt).unwrap();
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
        .arg(&mnt)
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some((tmp, mnt))
}

#[tokio::test]
async fn a_full_file_system_evicts_the_least_recently_used_objects_to_make_room() {
    let Some((_tmp, mnt)) = small_fs(700) else {
        eprintln!("SKIPPED: cannot mount a tmpfs (needs root)");
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let result = std::panic::AssertUnwindSafe(async {
        // The bound (1 MB) is never reached; the file system (700 KiB) fills first.
        let store = MediaStore::local(mnt.join("media"), 1 << 20).unwrap();
        let (src1, k1) = write(out.path(), "1.wav", &[1u8; 400_000]);
        let (src2, k2) = write(out.path(), "2.wav", &[2u8; 400_000]);
        store.put(&k1, &src1).await.unwrap();
        let written = store.put(&k2, &src2).await.unwrap();
        assert_eq!(written.evicted, vec![(k1.clone(), 400_000)]);
        assert!(store.contains(&k2).await.unwrap());
        assert!(!store.contains(&k1).await.unwrap());
        let s = store.stats();
        assert_eq!((s.write_failures, s.evictions), (0, 1));
        // Nothing to evict: the failure is counted.
        let (src3, k3) = write(out.path(), "3.wav", &[3u8; 800_000]);
        store.put(&k2, &src2).await.unwrap();
        let err = store.put(&k3, &src3).await.unwrap_err();
        assert!(err.to_string().contains("No space left"), "{err}");
        assert_eq!(store.stats().write_failures, 1);
    });
    let outcome = futures_util::FutureExt::catch_unwind(result).await;
    let _ = std::process::Command::new("umount").arg(&mnt).status();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

#[tokio::test]
async fn a_crash_left_over_is_removed_even_when_the_only_object_is_the_new_one() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("media");
    // Room for one 1000-byte object; a crash just left a 600-byte temporary file.
    let store = MediaStore::local(&dir, 1500).unwrap();
    let left = dir.join(".deadbeef.tmp");
    std::fs::write(&left, [9u8; 600]).unwrap();
    let (src, key) = write(tmp.path(), "1.wav", &[1u8; 1000]);
    assert!(store.put(&key, &src).await.unwrap().stored);
    assert!(
        !left.exists(),
        "a crash's left-over held the store over its bound"
    );
    assert!(store.contains(&key).await.unwrap());
}
