use super::*;
use proptest::prelude::*;

fn dir() -> impl Strategy<Value = Direction> {
    prop_oneof![Just(Direction::Increment), Just(Direction::Decrement)]
}

fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        any::<u16>().prop_map(|version| Request::Hello { version }),
        (".{0,64}", any::<bool>()).prop_map(|(path, manifest)| Request::Stat { path, manifest }),
        (any::<u32>(), ".{0,64}", MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE, any::<u64>(), any::<u64>(), dir()).prop_map(
            |(stream, path, block_size, first, last, dir)| {
                Request::Start { stream, path, block_size, first, last, dir }
            }
        ),
        (any::<u32>(), any::<u64>()).prop_map(|(stream, last)| Request::Extend { stream, last }),
        any::<u32>().prop_map(|stream| Request::End { stream }),
        any::<[u8; 32]>().prop_map(|mac| Request::Auth { mac }),
        (".{0,64}", any::<u64>(), 1..=MAX_MANIFEST_HASHES).prop_map(|(path, first, count)| Request::Manifest {
            path,
            first,
            count
        }),
        ".{0,64}".prop_map(|path| Request::Walk { path }),
        (
            ".{0,64}",
            proptest::collection::vec((any::<bool>(), ".{0,32}"), 0..8),
            (any::<bool>(), any::<bool>(), 0..3u8),
            "|[a-z.-]{0,2}[a-z][a-z.-]{0,12}(/[a-z][a-z.-]{0,8}){0,2}"
        )
            .prop_map(|(path, rules, (xattrs, names, one_fs), merge)| Request::WalkFiltered {
                path,
                rules,
                xattrs,
                names,
                merge,
                one_fs
            }),
        proptest::collection::vec(any::<u8>(), 0..MAX_BUNDLE_CHUNK)
            .prop_map(|d| Request::Bundle { data: Bytes::from(d) }),
        Just(Request::BundleEnd),
        (".{0,64}", MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE, any::<u64>(), 1..=MAX_MANIFEST_HASHES).prop_map(
            |(path, block_size, first, count)| {
                let most = (MAX_SEALS_BYTES / u64::from(block_size)).clamp(1, u64::from(MAX_MANIFEST_HASHES)) as u32;
                Request::Seals { path, block_size, first, count: count.min(most) }
            }
        ),
        (".{0,64}", any::<u64>(), 1..=MAX_MANIFEST_HASHES).prop_map(|(path, first, count)| Request::WeakSums {
            path,
            first,
            count
        }),
        ".{0,64}".prop_map(|path| Request::Tell { path }),
    ]
}

proptest! {
    /// A `Seals` over more than `MAX_SEALS_BYTES` of blocks is refused as
    /// it is read.
    #[test]
    fn seals_past_their_byte_cap_are_malformed(block_size in MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE, count in 1..=MAX_MANIFEST_HASHES) {
        let mut b = BytesMut::new();
        Request::Seals { path: "@bundle/x".into(), block_size, first: 0, count }.encode(&mut b);
        let over = u64::from(count) * u64::from(block_size) > MAX_SEALS_BYTES;
        prop_assert_eq!(Request::decode(&mut b).is_err(), over);
    }
}

fn reply() -> impl Strategy<Value = Reply> {
    prop_oneof![
        (any::<u16>(), any::<[u8; SERVER_ID_LEN]>(), any::<u32>())
            .prop_map(|(version, server_id, max_block_size)| Reply::Hello { version, server_id, max_block_size }),
        (any::<u64>(), any::<i64>(), any::<u32>(), any::<u32>(), any::<[u8; 32]>(), any::<[u8; 32]>()).prop_map(
            |(size, mtime_secs, mtime_nanos, chunk_size, sha256, manifest)| Reply::Stat {
                size,
                mtime_secs,
                mtime_nanos,
                digest: FileDigest { chunk_size, sha256, manifest }
            }
        ),
        (any::<u64>(), proptest::collection::vec(any::<[u8; 32]>(), 0..64))
            .prop_map(|(first, hashes)| Reply::Manifest { first, hashes }),
        (any::<u64>(), proptest::collection::vec(any::<u32>(), 0..64))
            .prop_map(|(first, sums)| Reply::WeakSums { first, sums }),
        (any::<u32>(), any::<u64>(), proptest::collection::vec(any::<u8>(), 0..2048))
            .prop_map(|(stream, block, p)| Reply::Block { stream, block, payload: Bytes::from(p) }),
        (any::<u32>(), any::<u64>(), any::<[u8; 32]>(), proptest::collection::vec(any::<u8>(), 0..2048))
            .prop_map(|(stream, block, hash, p)| Reply::SealedBlock { stream, block, hash, payload: Bytes::from(p) }),
        (any::<u32>(), any::<u64>()).prop_map(|(stream, sent)| Reply::Stopped { stream, sent }),
        any::<u32>().prop_map(|stream| Reply::Waiting { stream }),
        (any::<u32>(), any::<u32>(), any::<bool>()).prop_map(|(at, len, down)| Reply::Fetching {
            at: u64::from(at),
            len: u64::from(len),
            dir: if down { Direction::Decrement } else { Direction::Increment }
        }),
        (1u16..7, ".{0,64}").prop_map(|(c, message)| Reply::Error { code: ErrorCode::from_u16(c), message }),
        any::<[u8; 32]>().prop_map(|nonce| Reply::Challenge { nonce }),
        (".{0,64}", any::<u64>()).prop_map(|(name, size)| Reply::Bundle { name, size }),
        proptest::collection::vec(any::<u8>(), 0..4096).prop_map(|d| Reply::ListData { data: Bytes::from(d) }),
        any::<u64>().prop_map(|errors| Reply::ListEnd { errors }),
        (any::<u64>(), ".{0,64}").prop_map(|(index, message)| Reply::Unreadable { index, message }),
        (".{0,64}", ".{0,64}").prop_map(|(path, message)| Reply::WalkError { path, message }),
    ]
}

proptest! {
    #[test]
    fn requests_round_trip_in_any_chunking(reqs in proptest::collection::vec(request(), 1..8), cut in 1usize..64) {
        let mut wire = BytesMut::new();
        for r in &reqs { r.encode(&mut wire); }
        let mut src = BytesMut::new();
        let mut got = Vec::new();
        for chunk in wire.chunks(cut) {
            src.extend_from_slice(chunk);
            while let Some(r) = Request::decode(&mut src).unwrap() { got.push(r); }
        }
        prop_assert_eq!(got, reqs);
        prop_assert!(src.is_empty());
    }

    #[test]
    fn replies_round_trip(reps in proptest::collection::vec(reply(), 1..8)) {
        let mut wire = BytesMut::new();
        for r in &reps { r.encode(&mut wire); }
        let mut got = Vec::new();
        while let Some(r) = Reply::decode(&mut wire).unwrap() { got.push(r); }
        prop_assert_eq!(got, reps);
    }

    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let mut a = BytesMut::from(&bytes[..]);
        while let Ok(Some(_)) = Request::decode(&mut a) {}
        let mut b = BytesMut::from(&bytes[..]);
        while let Ok(Some(_)) = Reply::decode(&mut b) {}
    }
}

#[test]
fn block_header_matches_encode() {
    let payload = Bytes::from_static(b"abcdef");
    let mut a = BytesMut::new();
    Reply::Block { stream: 7, block: 42, payload: payload.clone() }.encode(&mut a);
    let mut b = vec![0u8; HEADER_LEN + BLOCK_PREFIX_LEN];
    put_block_header(&mut b, 7, 42, payload.len());
    b.extend_from_slice(&payload);
    assert_eq!(&a[..], &b[..]);
    let mut a = BytesMut::new();
    Reply::SealedBlock { stream: 7, block: 42, hash: seal(&payload), payload: payload.clone() }.encode(&mut a);
    let mut b = vec![0u8; HEADER_LEN + SEALED_PREFIX_LEN];
    put_sealed_block_header(&mut b, 7, 42, &seal(&payload), payload.len());
    b.extend_from_slice(&payload);
    assert_eq!(&a[..], &b[..]);
}

#[test]
fn oversized_lengths_are_refused_before_buffering() {
    let mut src = BytesMut::from(&[K_STAT, 0xff, 0xff, 0xff, 0xff][..]);
    assert!(matches!(Request::decode(&mut src), Err(ProtoError::TooLong { .. })));
    let mut src = BytesMut::from(&[K_R_BLOCK, 0x7f, 0xff, 0xff, 0xff][..]);
    assert!(matches!(Reply::decode(&mut src), Err(ProtoError::TooLong { .. })));
    let mut src = BytesMut::from(&[0x42u8][..]);
    assert_eq!(Request::decode(&mut src), Err(ProtoError::UnknownKind(0x42)));
}

#[test]
fn bad_fields_are_malformed() {
    let mut wire = BytesMut::new();
    Request::Start { stream: 1, path: "f".into(), block_size: 1, first: 0, last: 0, dir: Direction::Increment }
        .encode(&mut wire);
    assert!(matches!(Request::decode(&mut wire), Err(ProtoError::Malformed { .. })));
    let mut wire = BytesMut::from(&[K_HELLO, 0, 0, 0, 7, b'N', b'O', b'P', b'E', b'!', 0, 1][..]);
    assert_eq!(Request::decode(&mut wire), Err(ProtoError::BadMagic));
    let mut wire = BytesMut::from(&[K_END, 0, 0, 0, 5, 0, 0, 0, 1, 9][..]);
    assert!(matches!(Request::decode(&mut wire), Err(ProtoError::Malformed { why: "trailing bytes", .. })));
    for merge in ["a//b", "a/..", "/a", "a/", ".", "./b"] {
        let (path, rules) = (".".to_string(), vec![]);
        let mut wire = BytesMut::new();
        let merge = merge.to_string();
        Request::WalkFiltered { path, rules, xattrs: false, names: false, merge, one_fs: 0 }.encode(&mut wire);
        let why = "a merge file's name is a plain name";
        assert_eq!(Request::decode(&mut wire), Err(ProtoError::Malformed { kind: K_WALK_FILTERED, why }));
    }
}

#[test]
fn direction_span_and_step() {
    assert_eq!(Direction::Increment.span(3, 5), 3);
    assert_eq!(Direction::Increment.span(5, 3), 0);
    assert_eq!(Direction::Decrement.span(5, 3), 3);
    assert_eq!(Direction::Decrement.step(0), None);
    assert_eq!(Direction::Increment.step(0), Some(1));
}

#[test]
fn versions_7_to_11_are_spoken_and_no_other() {
    assert!(spoken(7) && spoken(8) && spoken(9) && spoken(10) && spoken(11));
    assert!(!spoken(6) && !spoken(12) && !spoken(0));
    // 8 only added WeakSums, which needs it; 9 only Waiting, sent to a
    // client that said 9; 10 several merge names, sent to a server that
    // said 10; 11 Tell, asked of a server that said 11.
    assert_eq!(
        (OLDEST_PROTOCOL_VERSION, WEAK_SUMS_VERSION, WAITING_VERSION, MERGE_NAMES_VERSION, TELL_VERSION),
        (7, 8, 9, 10, 11)
    );
    assert_eq!(PROTOCOL_VERSION, TELL_VERSION);
}
