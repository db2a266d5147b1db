//! rsync's `--chmod`: chmod(1) changes applied to each entry's mode as
//! the mirror lists it, as though SRC had that mode (so, without `-p`,
//! they show only on what the run makes, as rsync's). The same grammar and
//! arithmetic as rsync's `chmod.c`: comma-separated items, each
//! `[D|F][ugoa]*[-+=][rwxXst]*`, `[D|F][ugoa]*[-+=][ugo]` (copy another
//! class's bits) or `[D|F]OCTAL`; `D` only for directories, `F` only for
//! the rest; no class means `a` under the umask, as chmod(1).

/// The setuid, setgid, sticky and permission bits.
const BITS: u32 = 0o7777;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Add,
    Sub,
    Eq,
    Set,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Only {
    All,
    Dirs,
    Files,
}

/// One item, as rsync's `chmod_mode_struct`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Item {
    and: u32,
    or: u32,
    copy_src: u32,
    copy_dst: u32,
    copy_and: u32,
    op: Op,
    only: Only,
    /// `X`: execute only where some execute bit is set already, or on a
    /// directory.
    x_keep: bool,
}

/// The changes of every `--chmod` given, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chmod(Vec<Item>);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--chmod {given:?}: not a chmod change rsync takes (items like u+rwx,go-w, Dg+s, F644, or o=u; see chmod(1))")]
pub struct ChmodError {
    given: String,
}

/// Where an item is in its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Who,
    What,
    Octal,
}

/// One item being read.
#[derive(Debug, Default)]
struct Reading {
    who: u32,
    what: u32,
    op: Option<Op>,
    top_bits: u32,
    top_oct: u32,
    copy: u32,
    only: Option<Only>,
    x_keep: bool,
}

impl Chmod {
    /// Appends the items of one `--chmod` (`umask`: this process's, for
    /// items that name no class).
    pub fn add(&mut self, given: &str, umask: u32) -> Result<(), ChmodError> {
        let err = || ChmodError { given: given.to_string() };
        for text in given.split(',') {
            self.0.push(Self::item(text, umask).ok_or_else(err)?);
        }
        Ok(())
    }

    fn item(text: &str, umask: u32) -> Option<Item> {
        let mut r = Reading::default();
        let mut state = State::Who;
        for c in text.chars() {
            state = match state {
                State::Who => r.who_char(c)?,
                State::What => r.what_char(c)?,
                State::Octal => {
                    r.what = r.what * 8 + c.to_digit(8)?;
                    (r.what <= BITS).then_some(State::Octal)?
                }
            };
        }
        r.finish(umask)
    }

    /// `mode` (with its type bits) after every item that applies to it.
    pub fn tweak(&self, mode: u32, dir: bool) -> u32 {
        let is_x = mode & 0o111;
        let non_perm = mode & !BITS;
        let mut mode = mode;
        for i in &self.0 {
            match i.only {
                Only::Dirs if !dir => continue,
                Only::Files if dir => continue,
                _ => {}
            }
            let copied = copy_bits(mode, i.copy_src, i.copy_dst, i.copy_and);
            mode &= i.and;
            mode |= match i.x_keep && is_x == 0 && !dir {
                true => i.or & !0o111,
                false => i.or,
            };
            match i.op {
                Op::Sub => mode &= BITS & !copied,
                _ => mode |= copied,
            }
        }
        (mode & BITS) | non_perm
    }
}

impl Reading {
    fn who_char(&mut self, c: char) -> Option<State> {
        match c {
            'D' | 'F' => {
                let only = if c == 'D' { Only::Dirs } else { Only::Files };
                if self.only.is_some_and(|o| o != only) {
                    return None;
                }
                self.only = Some(only);
            }
            'u' => (self.who, self.top_bits) = (self.who | 0o100, self.top_bits | 0o4000),
            'g' => (self.who, self.top_bits) = (self.who | 0o010, self.top_bits | 0o2000),
            'o' => self.who |= 0o001,
            'a' => (self.who, self.top_bits) = (self.who | 0o111, self.top_bits | 0o6000),
            '+' | '-' | '=' => {
                self.op = Some(match c {
                    '+' => Op::Add,
                    '-' => Op::Sub,
                    _ => Op::Eq,
                });
                return Some(State::What);
            }
            '0'..='7' if self.who == 0 => {
                (self.op, self.who, self.what) = (Some(Op::Set), 1, c.to_digit(8)?);
                return Some(State::Octal);
            }
            _ => return None,
        }
        Some(State::Who)
    }

    fn what_char(&mut self, c: char) -> Option<State> {
        let copying = self.copy != 0;
        match c {
            'r' | 'w' | 'x' | 'X' | 's' | 't' if copying => return None,
            'r' => self.what |= 4,
            'w' => self.what |= 2,
            'x' => self.what |= 1,
            'X' => (self.what, self.x_keep) = (self.what | 1, true),
            's' => self.top_oct |= if self.top_bits != 0 { self.top_bits } else { 0o4000 },
            't' => self.top_oct |= 0o1000,
            'u' | 'g' | 'o' if self.what != 0 || self.top_oct != 0 || copying => return None,
            'u' => self.copy = 0o100,
            'g' => self.copy = 0o010,
            'o' => self.copy = 0o001,
            _ => return None,
        }
        Some(State::What)
    }

    fn finish(self, umask: u32) -> Option<Item> {
        let op = self.op?;
        let specified = self.who != 0;
        let (who, bits) = match specified {
            true => (self.who, self.who * self.what),
            false => (0o111, (0o111 * self.what) & !umask),
        };
        let copy_and = if specified { BITS } else { !umask & BITS };
        let (x_keep, only) = (self.x_keep, self.only.unwrap_or(Only::All));
        let item =
            |and, or, copy_src, copy_dst, copy_and| Item { and, or, copy_src, copy_dst, copy_and, op, only, x_keep };
        Some(match op {
            Op::Add => item(BITS, bits + self.top_oct, self.copy, who, copy_and),
            Op::Sub => item(BITS - bits - self.top_oct, 0, self.copy, who, copy_and),
            Op::Eq => {
                let top = if self.top_oct != 0 { self.top_bits } else { 0 };
                let special = if self.copy != 0 { special_bits(who) } else { 0 };
                item(BITS - who * 7 - top - special, bits + self.top_oct, self.copy, who, copy_and)
            }
            // rsync's octal item: `who` is 1, so `bits` is the number.
            Op::Set => item(0, self.what, 0, 0, BITS),
        })
    }
}

/// The setuid, setgid and sticky bits of the classes in `who`.
fn special_bits(who: u32) -> u32 {
    [(0o100, 0o4000), (0o010, 0o2000), (0o001, 0o1000)].iter().filter(|(w, _)| who & w != 0).map(|(_, b)| b).sum()
}

/// The bits of the class `src` names, copied to the classes of `dst`.
fn copy_bits(mode: u32, src: u32, dst: u32, and: u32) -> u32 {
    let mut bits = 0;
    if src & 0o100 != 0 {
        bits |= (mode >> 6) & 7;
    }
    if src & 0o010 != 0 {
        bits |= (mode >> 3) & 7;
    }
    if src & 0o001 != 0 {
        bits |= mode & 7;
    }
    (dst * bits) & and
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chmod(given: &str) -> Chmod {
        let mut c = Chmod::default();
        c.add(given, 0o022).unwrap();
        c
    }

    const FILE: u32 = 0o100000;
    const DIR: u32 = 0o040000;

    #[test]
    fn changes_as_chmod_makes_them() {
        assert_eq!(chmod("u+rwx,go-w").tweak(FILE | 0o666, false), FILE | 0o744);
        assert_eq!(chmod("go=").tweak(FILE | 0o755, false), FILE | 0o700);
        assert_eq!(chmod("F600").tweak(FILE | 0o755, false), FILE | 0o600);
        assert_eq!(chmod("F600").tweak(DIR | 0o755, true), DIR | 0o755);
        assert_eq!(chmod("D2775").tweak(DIR | 0o700, true), DIR | 0o2775);
        assert_eq!(chmod("Dg+s,ug+w,Fo-w,+X").tweak(DIR | 0o700, true), DIR | 0o2731);
        assert_eq!(chmod("Dg+s,ug+w,Fo-w,+X").tweak(FILE | 0o646, false), FILE | 0o664);
        // X: execute only where some is set already, or on a directory.
        assert_eq!(chmod("a+X").tweak(FILE | 0o644, false), FILE | 0o644);
        assert_eq!(chmod("a+X").tweak(FILE | 0o744, false), FILE | 0o755);
        // Copying a class's bits.
        assert_eq!(chmod("go=u").tweak(FILE | 0o640, false), FILE | 0o666);
        assert_eq!(chmod("o-g").tweak(FILE | 0o677, false), FILE | 0o670);
        // No class: all of them under the umask.
        assert_eq!(chmod("+w").tweak(FILE | 0o444, false), FILE | 0o644);
        assert_eq!(chmod("a+w").tweak(FILE | 0o444, false), FILE | 0o666);
        assert_eq!(chmod("u+s,+t").tweak(FILE | 0o755, false), FILE | 0o5755);
    }

    #[test]
    fn what_rsync_refuses_is_refused() {
        for bad in ["", "u", "u+q", "DF+r", "o=ur", "u+rg", "8", "u644", "+7", "77777", "a+r,", ",a+r", "u+r x"] {
            let mut c = Chmod::default();
            assert!(c.add(bad, 0o022).is_err(), "{bad:?}");
        }
        let e = Chmod::default().add("u+q", 0).unwrap_err();
        assert!(e.to_string().contains("\"u+q\""), "{e}");
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_read_or_refused_and_a_mode_keeps_its_type(given in "[DFugoa+=xXrwst0-9,-]{0,12}", mode in 0u32..0o7777) {
            let mut c = Chmod::default();
            if c.add(&given, 0o022).is_ok() {
                proptest::prop_assert_eq!(c.tweak(FILE | mode, false) & !BITS, FILE);
                proptest::prop_assert_eq!(c.tweak(DIR | mode, true) & !BITS, DIR);
            }
        }
    }
}
