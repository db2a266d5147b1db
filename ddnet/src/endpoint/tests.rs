use super::*;

/// A channel over one loopback link, and its peer.
async fn pair() -> (Arc<Striped>, Striped) {
    let l = StripeListener::bind(&["127.0.0.1:0".parse().unwrap()]).await.unwrap();
    let to = l.local_addrs().unwrap()[0];
    let route = [(None, to)];
    let (a, b) = tokio::join!(Striped::connect(&route), l.accept());
    (Arc::new(a.unwrap()), b.unwrap())
}

/// `a` sends one message its peer never takes (so never acknowledges);
/// frames that acknowledge it are then fed to `a` by hand.
async fn holding_one() -> (Arc<Striped>, Striped) {
    let (a, b) = pair().await;
    a.send(Bytes::from_static(b"held")).await.unwrap();
    assert_eq!(a.shared.state.lock().unwrap().unacked.ids().collect::<Vec<_>>(), [0]);
    (a, b)
}

#[tokio::test]
async fn acks_in_front_of_a_long_runs_header_are_applied_at_once() {
    let (a, _b) = holding_one().await;
    let (mut buf, mut ids) = (vec![], LinkIds::default());
    Frame::Ack { msg: 0 }.encode(&mut buf, &mut ids);
    // A long run's header and the start of its payload: the reader
    // reads the rest straight, and the ack must not wait for that.
    Frame::Run { msg: 0, msg_len: 1 << 20, offset: 0, len: 512 << 10 }.encode(&mut buf, &mut ids);
    buf.extend_from_slice(&[1; 1000]);
    let mut acks = vec![];
    let applied = apply_frames(&a.shared, 0, &buf, &mut LinkIds::default(), &mut acks).unwrap();
    assert!(applied.long.is_some() && !applied.delivered);
    assert!(acks.is_empty() && a.shared.state.lock().unwrap().unacked.is_empty(), "the ack is applied");
}

#[tokio::test]
async fn acks_in_front_of_a_message_for_a_waiting_receiver_wait_for_its_turn() {
    let (a, _b) = holding_one().await;
    let waiting = {
        let a = a.clone();
        tokio::spawn(async move { a.recv().await })
    };
    while a.shared.state.lock().unwrap().receivers.is_empty() {
        tokio::task::yield_now().await;
    }
    let (mut buf, mut ids) = (vec![], LinkIds::default());
    Frame::Ack { msg: 0 }.encode(&mut buf, &mut ids);
    Frame::Run { msg: 0, msg_len: 5, offset: 0, len: 5 }.encode(&mut buf, &mut ids);
    buf.extend_from_slice(b"hello");
    let mut acks = vec![];
    let applied = apply_frames(&a.shared, 0, &buf, &mut LinkIds::default(), &mut acks).unwrap();
    assert!(applied.delivered && applied.took == buf.len());
    assert_eq!(acks, [0], "left for after the receiver's turn");
    assert!(!a.shared.state.lock().unwrap().unacked.is_empty());
    assert_eq!(waiting.await.unwrap().unwrap().as_deref(), Some(&b"hello"[..]));
    let mut w = Woken::default();
    apply_acks(&mut a.shared.state.lock().unwrap(), &mut acks, &mut w);
    assert!(acks.is_empty() && a.shared.state.lock().unwrap().unacked.is_empty());
}

#[tokio::test]
async fn short_messages_in_turn_all_go_out_from_send() {
    // What the kernel says of the link is asked after a message left,
    // so in a ping-pong the next one never finds it stale (which would
    // send it the writer's way, asking the kernel first).
    let (a, b) = pair().await;
    let echo = tokio::spawn(async move {
        while let Some(m) = b.recv().await.unwrap() {
            b.send(m).await.unwrap();
        }
        b.close().await.unwrap();
    });
    let msg = Bytes::from(vec![7u8; 16 << 10]);
    for i in 0..64 {
        {
            let st = a.shared.state.lock().unwrap();
            assert!(a.shared.idle_link(&st, msg.len()).is_some(), "message {i} waits for the writer");
        }
        a.send(msg.clone()).await.unwrap();
        assert_eq!(a.recv().await.unwrap().map(|m| m.len()), Some(msg.len()));
    }
    a.close().await.unwrap();
    assert!(a.recv().await.unwrap().is_none());
    echo.await.unwrap();
}

#[test]
fn acks_alone_avoid_a_quiet_link_and_a_lost_link_acknowledges_again() {
    let t = Instant::now() + Duration::from_secs(10);
    let mut st = State::new(2, t);
    let mut now = Now::at(t);
    assert!(!st.quiet(1, &mut now), "nothing heard yet: any link");
    st.heard = vec![Some(t), Some(t - Duration::from_secs(2))];
    assert!(st.quiet(1, &mut now) && !st.quiet(0, &mut now));
    // With the busy link lost, the quiet one is all there is.
    st.fail_link(0, "gone".into());
    assert!(!st.quiet(1, &mut now));
    // Failing it queued acks again for every message taken that the peer
    // may still hold (at most MAX_AHEAD of them).
    st.next_deliver = 5000;
    st.acks.clear();
    st.fail_link(1, "gone too".into());
    assert_eq!(st.acks.len() as u64, MAX_AHEAD);
    assert_eq!((st.acks.front(), st.acks.back()), (Some(&(5000 - MAX_AHEAD)), Some(&4999)));
}

#[test]
fn a_link_that_stops_moving_while_another_moves_is_frozen_until_it_moves() {
    let t = Instant::now();
    let mut st = State::new(2, t);
    let data = Bytes::from(vec![7u8; 1000]);
    st.unacked.insert(0, data);
    st.carried[1].push_back(crate::plan::Claim { msg: 0, offset: 0, len: 1000 });
    let at = |ms: u64| t + Duration::from_millis(ms);
    assert!(!st.watch(&[Some(10), Some(10)], at(100)));
    // Link 1 still, link 0 moving: frozen after FROZEN, its run handed back.
    assert!(!st.watch(&[Some(20), Some(10)], at(600)));
    assert!(st.watch(&[Some(30), Some(10)], at(1200)));
    assert!(st.frozen[1] && st.carried[1].is_empty() && st.resent == 1000);
    assert_eq!(st.plan.next(1), crate::plan::Next::Nothing, "no new runs while frozen");
    // It moves again: it takes runs again.
    assert!(st.watch(&[Some(40), Some(11)], at(1500)));
    assert!(!st.frozen[1]);
    // Everything still (a receiver that does not read): nobody is frozen.
    let mut st = State::new(2, t);
    st.unacked.insert(0, Bytes::from(vec![7u8; 10]));
    st.carried[0].push_back(crate::plan::Claim { msg: 0, offset: 0, len: 10 });
    assert!(!st.watch(&[Some(5), Some(5)], at(5000)) && !st.frozen[0]);
}

proptest::proptest! {
    /// Whatever the kernel's counts say, in whatever order: a frozen link
    /// carries nothing and is alive, a link alone is never frozen, and
    /// every run a frozen link had carried is counted as sent again.
    #[test]
    fn frozen_links_carry_nothing_and_a_lone_link_is_never_frozen(
        links in 1usize..4,
        steps in proptest::collection::vec((proptest::collection::vec(proptest::option::of(0u64..4), 3), 0u64..800), 1..40),
    ) {
        let t = Instant::now();
        let mut st = State::new(links, t);
        for i in 0..links {
            st.unacked.insert(i as u64, Bytes::from(vec![1u8; 100]));
            st.carried[i].push_back(crate::plan::Claim { msg: i as u64, offset: 0, len: 100 });
        }
        let mut at = t;
        for (acked, ms) in steps {
            at += Duration::from_millis(ms);
            st.watch(&acked[..links], at);
            for l in 0..links {
                proptest::prop_assert!(!st.frozen[l] || (st.carried[l].is_empty() && st.alive[l]));
            }
            proptest::prop_assert!(links > 1 || !st.frozen[0]);
            let frozen_once = st.resent / 100;
            proptest::prop_assert!(frozen_once <= links as u64);
        }
    }
}
