use super::*;
use crate::archive::deep::Dest;
use crate::archive::listing::is_done;
use crate::archive::Item;
use ddtree::list::{Entry, Kind, Time};
use std::path::PathBuf;

fn item(path: &str, size: u64, perm: u32, sec: i64) -> Item {
    let entry = Entry {
        path: path.into(),
        kind: Kind::File,
        perm,
        size,
        mtime: Time { sec, nsec: 5 },
        meta: Default::default(),
    };
    Item { entry, rel: PathBuf::from(path) }
}

/// The two `items` hold their bytes of "abcde" and are finished.
fn assert_written(dir: &Path, items: &[Item]) {
    for (it, want) in items.iter().zip([&b"abc"[..], b"de"]) {
        let p = Dest::open(dir).unwrap().join(&it.rel);
        assert_eq!(std::fs::read(&*p).unwrap(), want);
        assert!(is_done(&p, &it.entry), "{p:?} not finished");
    }
}

/// "a" and "b", "abcde" written whole into a fresh `dir`.
fn abcde(dir: &Path) -> (TreeStore, [Item; 2]) {
    let items = [item("a", 3, 0o640, 1_000_000_000), item("b", 2, 0o444, 1_100_000_000)];
    let refs: Vec<&Item> = items.iter().collect();
    let store = TreeStore::new(&refs, &Dest::open(dir).unwrap(), true, 0o022, false).unwrap();
    store.create().unwrap();
    store.write_all_at(b"abcde", 0).unwrap();
    (store, items)
}

#[test]
fn whole_files_are_finished_as_written_and_once() {
    let dir = tempfile::tempdir().unwrap();
    let (store, items) = abcde(dir.path());
    assert_written(dir.path(), &items);
    assert!(store.is_finished(0) && store.is_finished(1));
    // The same bytes again (a pair's overlap): dropped, mtime kept.
    store.write_all_at(b"abcde", 0).unwrap();
    assert!(is_done(&Dest::open(dir.path()).unwrap().join("a"), &items[0].entry));
}

#[test]
fn ahead_only_directories_are_made_and_no_name_holds_a_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let items = [item("a", 3, 0o640, 1_000_000_000), item("sub/b", 2, 0o444, 1_100_000_000)];
    let refs: Vec<&Item> = items.iter().collect();
    let store = TreeStore::new(&refs, &Dest::open(dir.path()).unwrap(), true, 0o022, false).unwrap();
    store.create_ahead(&AtomicBool::new(false)).unwrap();
    assert!(dir.path().join("sub").is_dir());
    assert!(!dir.path().join("a").exists() && !dir.path().join("sub/b").exists());
    // A file whose bytes come in two writes is in its part file until
    // put in place.
    store.write_all_at(b"ab", 0).unwrap();
    assert!(!dir.path().join("a").exists() && store.part_path(0).exists());
    store.write_all_at(b"cde", 2).unwrap();
    store.put_in_place(0, &items[0].entry).unwrap();
    assert_written(dir.path(), &items);
    assert!(!store.part_path(0).exists());
    // Stopped before it began, or not a fresh destination: nothing made.
    let other = tempfile::tempdir().unwrap();
    TreeStore::new(&refs, &Dest::open(other.path()).unwrap(), true, 0o022, false)
        .unwrap()
        .create_ahead(&AtomicBool::new(true))
        .unwrap();
    TreeStore::new(&refs, &Dest::open(other.path()).unwrap(), false, 0o022, false)
        .unwrap()
        .create_ahead(&AtomicBool::new(false))
        .unwrap();
    assert_eq!(std::fs::read_dir(other.path()).unwrap().count(), 0);
}

#[test]
fn an_unreadable_entry_is_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let items = [item("a", 3, 0o640, 1_000_000_000), item("b", 2, 0o444, 1_100_000_000)];
    let refs: Vec<&Item> = items.iter().collect();
    let store = TreeStore::new(&refs, &Dest::open(dir.path()).unwrap(), true, 0o022, false).unwrap();
    store.unreadable(0, "a: Permission denied", "m1").unwrap();
    assert!(store.unreadable(2, "no such entry", "m1").is_err());
    store.write_all_at(b"\0\0\0de", 0).unwrap();
    assert!(!dir.path().join("a").exists());
    assert!(is_done(&Dest::open(dir.path()).unwrap().join("b"), &items[1].entry));
    let unread = store.unread();
    assert_eq!((unread.len(), unread[0].0, unread[0].1.mirrors.clone()), (1, 0, vec!["m1".to_string()]));
}

#[test]
fn a_resumed_run_leaves_files_an_interrupted_one_finished() {
    let dir = tempfile::tempdir().unwrap();
    let items = [item("a", 3, 0o444, 1_000_000_000), item("b", 3, 0o644, 1_000_000_000)];
    let refs: Vec<&Item> = items.iter().collect();
    TreeStore::new(&refs, &Dest::open(dir.path()).unwrap(), true, 0o022, false)
        .unwrap()
        .write_all_at(b"abc", 0)
        .unwrap();
    // Same size, mode and mtime: complete, so not written again (the
    // other bytes prove it), though read-only.
    std::fs::set_permissions(dir.path().join("a"), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(dir.path().join("a"), b"xyz").unwrap();
    std::fs::set_permissions(dir.path().join("a"), std::fs::Permissions::from_mode(0o444)).unwrap();
    deep::set_mtime(&Dest::open(dir.path()).unwrap().join("a"), items[0].entry.mtime).unwrap();
    let again = TreeStore::new(&refs, &Dest::open(dir.path()).unwrap(), false, 0o022, false).unwrap();
    again.create().unwrap();
    again.write_all_at(b"abcdef", 0).unwrap();
    assert_eq!(std::fs::read(dir.path().join("a")).unwrap(), b"xyz");
    assert_eq!(std::fs::read(dir.path().join("b")).unwrap(), b"def");
    assert!(is_done(&Dest::open(dir.path()).unwrap().join("b"), &items[1].entry));
}

#[test]
fn what_is_read_back_to_share_is_the_file_written_not_one_put_in_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = abcde(dir.path());
    let mut buf = [0u8; 5];
    store.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"abcde");
    // A local user swaps "a" for a link to a file of theirs (or anyone's).
    let secret = dir.path().join("secret");
    std::fs::write(&secret, b"XYZ").unwrap();
    std::fs::remove_file(dir.path().join("a")).unwrap();
    std::fs::hard_link(&secret, dir.path().join("a")).unwrap();
    let e = store.read_exact_at(&mut buf, 0).unwrap_err();
    assert!(e.to_string().contains("not the file this archive wrote"), "{e}");
    // And for a symlink: never followed.
    std::fs::remove_file(dir.path().join("a")).unwrap();
    std::os::unix::fs::symlink(&secret, dir.path().join("a")).unwrap();
    assert!(store.read_exact_at(&mut buf, 0).is_err());
    // "b" is untouched: still served.
    let mut b = [0u8; 2];
    store.read_exact_at(&mut b, 3).unwrap();
    assert_eq!(&b, b"de");
}
