//! The progress of a streamed archive's parts as one bar: their bytes add
//! up, and so does each mirror's share (matched by name: each part
//! numbers its mirrors in the order they joined it); and a part's bytes
//! told as entries moved ([`Counting`]).

use crate::transfer::Progress;

pub(super) struct Parts<'a> {
    inner: &'a mut dyn Progress,
    /// Bytes of the parts before this one.
    before: u64,
    /// Bytes of this one.
    part: u64,
    /// This part's mirrors, and the bytes each sent in it so far.
    mirrors: Vec<String>,
    sent: Vec<u64>,
    /// What each mirror sent in the parts before this one.
    earlier: Vec<(String, u64)>,
}

impl<'a> Parts<'a> {
    pub(super) fn new(inner: &'a mut dyn Progress) -> Parts<'a> {
        Parts { inner, before: 0, part: 0, mirrors: vec![], sent: vec![], earlier: vec![] }
    }

    fn earlier(&self, mirror: &str) -> u64 {
        self.earlier.iter().find(|(m, _)| m == mirror).map_or(0, |(_, b)| *b)
    }
}

impl Progress for Parts<'_> {
    fn start(&mut self, total: u64, mirrors: &[String]) {
        self.part = total;
        self.mirrors = mirrors.to_vec();
        self.sent = vec![0; mirrors.len()];
        self.inner.start(self.before + total, mirrors);
    }

    fn update(&mut self, done: u64, per_mirror: &[u64]) {
        self.sent = per_mirror.to_vec();
        let all: Vec<u64> = self.mirrors.iter().zip(per_mirror).map(|(m, b)| b + self.earlier(m)).collect();
        self.inner.update(self.before + done, &all);
    }

    fn warn(&mut self, msg: &str) {
        self.inner.warn(msg);
    }

    fn joined(&mut self, mirror: &str) {
        self.mirrors.push(mirror.to_string());
        self.inner.joined(mirror);
    }

    fn entries(&mut self, counts: crate::transfer::EntryCounts) {
        self.inner.entries(counts);
    }

    fn status(&mut self, msg: &str) {
        self.inner.status(msg);
    }

    /// The part is done (the bar goes on: it ends with the archive).
    fn finish(&mut self) {
        self.before += self.part;
        self.part = 0;
        for (m, &b) in self.mirrors.iter().zip(&self.sent) {
            match self.earlier.iter_mut().find(|(e, _)| e == m) {
                Some((_, e)) => *e += b,
                None => self.earlier.push((m.clone(), b)),
            }
        }
    }
}

/// The progress of a part's bytes, told as entries too: those whole
/// within the bytes received (an estimate: a range fills from both ends).
pub(super) struct Counting<'p, 'l> {
    pub(super) inner: &'p mut dyn Progress,
    pub(super) layout: &'l ddtree::layout::Layout,
    pub(super) counts: &'l std::sync::Mutex<super::archiving::Tally>,
}

impl Progress for Counting<'_, '_> {
    fn start(&mut self, total: u64, mirrors: &[String]) {
        self.inner.start(total, mirrors);
    }
    fn update(&mut self, done: u64, per_mirror: &[u64]) {
        let mut c = self.counts.lock().expect("tally lock").counts;
        c.moved += self.layout.entries_within(done) as u64;
        self.inner.entries(c);
        self.inner.update(done, per_mirror);
    }
    fn warn(&mut self, msg: &str) {
        self.inner.warn(msg);
    }
    fn joined(&mut self, mirror: &str) {
        self.inner.joined(mirror);
    }
    fn finish(&mut self) {
        self.inner.finish();
    }
    fn status(&mut self, msg: &str) {
        self.inner.status(msg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the bar was last told.
    #[derive(Default)]
    struct Seen {
        total: u64,
        done: u64,
        mirrors: Vec<String>,
        per_mirror: Vec<u64>,
    }

    impl Progress for Seen {
        fn start(&mut self, total: u64, mirrors: &[String]) {
            (self.total, self.mirrors) = (total, mirrors.to_vec());
        }
        fn update(&mut self, done: u64, per_mirror: &[u64]) {
            (self.done, self.per_mirror) = (done, per_mirror.to_vec());
        }
        fn warn(&mut self, _: &str) {}
        fn joined(&mut self, mirror: &str) {
            self.mirrors.push(mirror.to_string());
        }
        fn finish(&mut self) {}
    }

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn each_mirror_s_bytes_add_up_over_the_parts_by_name() {
        let mut seen = Seen::default();
        let mut parts = Parts::new(&mut seen);
        parts.start(100, &names(&["m1", "m2"]));
        parts.update(100, &[70, 30]);
        parts.finish();
        // The second part's mirrors joined in another order.
        parts.start(50, &names(&["m2"]));
        parts.joined("m1");
        parts.update(50, &[20, 30]);
        assert_eq!((seen.total, seen.done), (150, 150));
        assert_eq!(seen.mirrors, names(&["m2", "m1"]));
        assert_eq!(seen.per_mirror, vec![50, 100]);
    }
}
