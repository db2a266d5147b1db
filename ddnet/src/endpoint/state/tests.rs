//! The endpoint's state without sockets: the window, reassembly, acks,
//! a failed link's runs sent again, the end.

use super::*;

/// The window bug: a file sent in 8 KiB pieces over a slow link. A
/// sender with no ack back yet may have out only ids its receiver takes
/// (its oldest unacknowledged id is at most the receiver's oldest not
/// yet arrived).
#[test]
fn a_sender_never_has_out_an_id_its_receiver_refuses() {
    let mut unacked = Unacked::default();
    let (mut bytes, mut id) = (0, 0);
    let piece = Bytes::from(vec![0u8; 8 * 1024]);
    while has_room(&unacked, bytes, &piece) {
        assert!(takes(id, 0), "message {id} sent while message 0 is still on its way");
        unacked.insert(id, piece.clone());
        bytes += held(&piece);
        id += 1;
    }
    assert_eq!(id, MAX_AHEAD, "the window ends at what the receiver takes");
    // An ack of the oldest makes room for one more.
    unacked.remove(0);
    assert!(has_room(&unacked, bytes - held(&piece), &piece) && takes(id, 1));
}

#[test]
fn unacked_messages_leave_in_any_order() {
    let mut u = Unacked::default();
    for id in 5..10 {
        u.insert(id, Bytes::from(vec![id as u8; 3]));
    }
    assert_eq!(u.get(4), None);
    assert_eq!(u.get(7).map(|b| b[0]), Some(7));
    // Acks that overtook each other on different links.
    assert_eq!(u.remove(7).map(|b| b[0]), Some(7));
    assert_eq!(u.remove(7), None, "acknowledged once");
    assert_eq!(u.remove(5).map(|b| b[0]), Some(5));
    assert_eq!(u.ids().collect::<Vec<_>>(), [6, 8, 9]);
    assert_eq!(u.remove(42), None);
    for id in [9, 6, 8] {
        assert!(u.remove(id).is_some());
    }
    assert!(u.is_empty());
    // Emptied, it starts at the next id given.
    u.insert(10, Bytes::new());
    assert_eq!(u.ids().collect::<Vec<_>>(), [10]);
    assert!(!u.is_empty());
}

/// A state over `n` links with message `id` of `len` bytes sent.
fn sender(n: usize, len: usize) -> State {
    let mut st = State::new(n, Instant::now());
    let msg = Bytes::from(vec![7u8; len]);
    st.unacked_bytes += held(&msg);
    let id = st.plan.push(len as u64);
    st.unacked.insert(id, msg);
    st
}

#[test]
fn a_message_in_runs_from_two_links_is_delivered_whole_and_a_repeat_is_only_acknowledged() {
    let mut st = State::new(2, Instant::now());
    let t = Instant::now();
    let (a, b) = (vec![1u8; 100], vec![2u8; 50]);
    // The second part first, on the other link.
    st.on_run(1, 0, 150, 100, Bytes::from(b.clone()), &mut Now::at(t)).unwrap();
    assert!(st.inbox.is_empty());
    st.on_run(0, 0, 150, 0, Bytes::from(a.clone()), &mut Now::at(t + Duration::from_millis(1))).unwrap();
    let (id, m) = st.inbox.pop_front().expect("delivered");
    let m = m.into_bytes();
    assert_eq!((id, &m[..100], &m[100..]), (0, &a[..], &b[..]));
    // Sent again after a link failed: acknowledged, not delivered twice.
    st.on_whole(0, Bytes::from(vec![0u8; 150])).unwrap();
    assert!(st.inbox.is_empty() && st.acks == [0]);
}

/// Runs sent again after a link failed may be cut elsewhere than the
/// first time: each byte is taken once, the message delivered only when
/// every byte is here, and as the runs were read (no copy).
#[test]
fn runs_that_overlap_fill_only_what_is_missing() {
    let mut st = State::new(2, Instant::now());
    let data: Vec<u8> = (0..200u8).collect();
    let run = |a: usize, b: usize| Bytes::copy_from_slice(&data[a..b]);
    let now = &mut Now::at(Instant::now());
    for (a, b) in [(0, 80), (40, 120), (0, 120), (150, 200), (100, 160)] {
        assert!(st.inbox.is_empty(), "delivered before {a}..{b}");
        st.on_run(0, 0, 200, a as u64, run(a, b), now).unwrap();
    }
    let (_, m) = st.inbox.pop_front().expect("delivered");
    assert_eq!(m.runs().iter().map(Bytes::len).collect::<Vec<_>>(), [80, 40, 30, 50]);
    assert_eq!(m.into_bytes(), data);
}

#[test]
fn messages_are_delivered_in_order_whatever_order_they_arrive_in() {
    let mut st = State::new(2, Instant::now());
    for id in [2u64, 0, 3, 1] {
        st.on_whole(id, Bytes::from(vec![id as u8])).unwrap();
    }
    let got: Vec<u64> = st.inbox.iter().map(|(id, _)| *id).collect();
    assert_eq!(got, [0, 1, 2, 3]);
}

/// The window bug, the receiver's side: a message past what it takes is
/// a broken link, and a part whose message length changed too.
#[test]
fn a_receiver_refuses_messages_too_far_ahead_and_lengths_that_change() {
    let mut st = State::new(1, Instant::now());
    assert!(matches!(st.on_whole(MAX_AHEAD + 1, Bytes::new()), Err(BadFrame::FarAhead { .. })));
    st.on_whole(MAX_AHEAD, Bytes::new()).unwrap();
    let now = &mut Now::at(Instant::now());
    st.on_run(0, 1, 10, 0, Bytes::from_static(&[0; 5]), now).unwrap();
    let changed = st.on_run(0, 1, 12, 5, Bytes::from_static(&[0; 5]), now);
    assert!(matches!(changed, Err(BadFrame::LengthChanged { .. })));
}

#[test]
fn a_failed_links_runs_of_unacknowledged_messages_go_out_on_another() {
    let mut st = sender(2, 4000);
    let now = &mut Now::at(Instant::now());
    let Work::Frame(_, Some((claim, _))) = st.next_work(0, true, 0, vec![], &mut LinkIds::default(), now) else {
        panic!("link 0 has a run to send");
    };
    st.fail_link(0, "reset".into());
    assert_eq!(st.resent, u64::from(claim.len));
    let mut sent_again = 0;
    while let Work::Frame(_, Some((c, _))) = st.next_work(1, true, 0, vec![], &mut LinkIds::default(), now) {
        sent_again += u64::from(c.len);
    }
    assert_eq!(sent_again, 4000, "link 1 sends the whole message");
    assert!(st.error.is_none());
    st.fail_link(1, "reset".into());
    assert!(st.error.as_deref().is_some_and(|e| e.contains("every link failed")) && !st.inbox_open);
}

#[test]
fn acks_alone_wait_for_the_ack_delay_unless_many_are_pending() {
    let mut st = State::new(1, Instant::now());
    let t = Instant::now();
    st.on_whole(0, Bytes::new()).unwrap();
    st.inbox.clear();
    st.queue_ack(0);
    st.acks_since = Some(t);
    assert!(!st.acks_due(&mut Now::at(t)));
    assert!(st.acks_due(&mut Now::at(t + ACK_DELAY)));
    for id in 1..ACK_BATCH as u64 {
        st.queue_ack(id);
    }
    assert!(st.acks_due(&mut Now::at(t)), "a full batch goes at once");
}

#[test]
fn the_end_comes_once_every_message_the_peer_sent_is_delivered() {
    let mut st = State::new(1, Instant::now());
    st.on_whole(0, Bytes::new()).unwrap();
    st.peer_count = Some(2);
    st.check_closed();
    assert!(st.inbox_open);
    st.on_whole(1, Bytes::new()).unwrap();
    assert!(!st.inbox_open);
}

proptest::proptest! {
    /// Whatever runs a peer sends (overlapping, repeated, in any order),
    /// a message is delivered once every byte of it has come, never
    /// before, and holds exactly the bytes sent.
    #[test]
    fn any_runs_that_cover_a_message_deliver_it_exactly(
        len in 1usize..2000,
        cuts in proptest::collection::vec((0usize..2000, 1usize..600), 1..40),
    ) {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
        let mut st = State::new(1, Instant::now());
        let now = &mut Now::at(Instant::now());
        let mut covered = vec![false; len];
        // The runs given, then the whole message in one last run.
        let runs = cuts.into_iter().map(|(a, n)| (a % len, (a % len + n).min(len))).chain([(0, len)]);
        for (a, b) in runs {
            proptest::prop_assert!(st.inbox.is_empty() || covered.iter().all(|&c| c));
            if st.inbox.is_empty() {
                st.on_run(0, 0, len as u64, a as u64, Bytes::copy_from_slice(&data[a..b]), now).unwrap();
                covered[a..b].iter_mut().for_each(|c| *c = true);
                proptest::prop_assert_eq!(st.inbox.is_empty(), !covered.iter().all(|&c| c));
            }
        }
        let (_, m) = st.inbox.pop_front().expect("delivered");
        proptest::prop_assert_eq!(m.len(), len);
        proptest::prop_assert_eq!(&m.into_bytes()[..], &data[..]);
    }
}
