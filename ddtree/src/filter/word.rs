//! One filter rule as rsync writes it (`-f`, a line of a merge file):
//! `RULE[,MODIFIERS] [ARG]`, the rule a short name (`-`, `+`, `.`, `:`,
//! `H`, `S`, `P`, `R`, `!`; the `,` optional) or a long one (`exclude`,
//! `include`, `merge`, `dir-merge`, `hide`, `show`, `protect`, `risk`,
//! `clear`), the argument after one space or `_`.
//!
//! Modifiers of `-` and `+`: `!` (the rule holds where the pattern does
//! not match), `s` (the sending side only: what is listed), `r` (the
//! receiving side only: what `--delete` leaves), `p` (perishable: not
//! heeded inside a directory being deleted). `H`/`S` are `-s`/`+s`,
//! `P`/`R` are `-r`/`+r`. Of a merge: `-` or `+` (each line a pattern
//! only), `n` (its rules not inherited below its directory), `e` (the
//! file itself not copied), `w` (each line split into words at blanks,
//! each word a rule), `C` (read as CVS reads `.cvsignore`: `-`, `w` and
//! `n`, a `!` word clearing; the name may be left out for `.cvsignore`),
//! and `s`, `r`, `p` as its rules' defaults. `-C` alone is rsync's: the
//! global CVS excludes in its place ([`super::cvs`]).
//! `x` after `-` or `+` makes a rule of xattr names (`-x security.*`):
//! what `-X` copies and which of DEST's it removes or changes.
//! rsync's `/` (absolute paths) is refused, named: a rule taken wrong
//! could copy what was meant to stay.

/// The side of a transfer a rule speaks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Side {
    /// Both (unless `--delete-excluded`: then the sender's only).
    #[default]
    Both,
    /// What is listed and copied (`s`, `H`, `S`).
    Sender,
    /// What `--delete` leaves (`r`, `P`, `R`).
    Receiver,
}

/// What a `-`/`+` rule's modifiers say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct How {
    pub side: Side,
    /// `!`: the rule holds where its pattern does not match.
    pub negate: bool,
    /// `p`: not heeded inside a directory being deleted.
    pub perishable: bool,
    /// `x`: the pattern is of xattr names (which `-X` copies, and which
    /// of DEST's it may remove or change), not of paths.
    pub xattr: bool,
}

impl How {
    /// The modifiers as rsync writes them after `-` or `+`.
    pub fn letters(&self) -> String {
        let mut s = String::new();
        if self.negate {
            s.push('!');
        }
        if self.perishable {
            s.push('p');
        }
        if self.xattr {
            s.push('x');
        }
        match self.side {
            Side::Both => {}
            Side::Sender => s.push('s'),
            Side::Receiver => s.push('r'),
        }
        s
    }
}

/// How a merge file's lines are read (a merge rule's modifiers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MergeHow {
    /// `-` or `+`: every line a pattern that excludes (`false`) or
    /// includes (`true`), no rule words.
    pub plain: Option<bool>,
    /// `n`: a directory's rules do not apply below its subdirectories.
    pub no_inherit: bool,
    /// `e`: the merge file itself is not copied.
    pub exclude_self: bool,
    /// `w`: each line split into words at blanks, each word a rule.
    pub word_split: bool,
    /// `C`: a `.cvsignore` (`-`, `w`, `n`; a `!` word clears).
    pub cvs: bool,
    /// `s`, `r`, `p`: what its rules have without saying.
    pub rules: How,
}

impl MergeHow {
    pub fn letters(&self) -> String {
        if self.cvs {
            // `C` says `-`, `w` and `n` (rsync refuses them beside it).
            return format!("C{}", if self.exclude_self { "e" } else { "" }) + &self.rules.letters();
        }
        let mut s = String::new();
        match self.plain {
            Some(false) => s.push('-'),
            Some(true) => s.push('+'),
            None => {}
        }
        if self.no_inherit {
            s.push('n');
        }
        if self.exclude_self {
            s.push('e');
        }
        if self.word_split {
            s.push('w');
        }
        s + &self.rules.letters()
    }

    /// The rules a line of a file read this way holds: the line, or with
    /// `w` each of its words.
    pub(super) fn words<'a>(&self, line: &'a str) -> Vec<&'a str> {
        match self.word_split {
            true => line.split_ascii_whitespace().collect(),
            false => vec![line],
        }
    }

    /// The rule a line (or a word, [`MergeHow::words`]) of a file read
    /// this way holds.
    pub(super) fn line<'a>(&self, line: &'a str) -> Result<Word<'a>, String> {
        if self.cvs && line == "!" {
            return Ok(Word::Clear);
        }
        let w = match self.plain {
            Some(include) => Word::Rule(include, How::default(), line),
            None => word(line)?,
        };
        match w {
            Word::Rule(include, how, p) => {
                if self.rules.side != Side::Both && how.side != Side::Both {
                    return Err("the merge rule gives the sides: its lines may not".into());
                }
                let side = if how.side == Side::Both { self.rules.side } else { how.side };
                let perishable = how.perishable || self.rules.perishable;
                Ok(Word::Rule(include, How { side, perishable, ..how }, p))
            }
            w => Ok(w),
        }
    }
}

/// One rule.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Word<'a> {
    /// `!` or `clear`: the rules before it dropped.
    Clear,
    /// `- PATTERN`, `+ PATTERN` and their kin: whether it includes.
    Rule(bool, How, &'a str),
    /// `: NAME` (`dir-merge NAME`).
    DirMerge(MergeHow, &'a str),
    /// `. FILE` (`merge FILE`).
    Merge(MergeHow, &'a str),
    /// `-C`: the global CVS excludes in this place.
    Cvs,
}

const LONG: [(&str, char); 9] = [
    ("exclude", '-'),
    ("include", '+'),
    ("merge", '.'),
    ("dir-merge", ':'),
    ("hide", 'H'),
    ("show", 'S'),
    ("protect", 'P'),
    ("risk", 'R'),
    ("clear", '!'),
];

const TAKES: &str = "takes `- PATTERN`, `+ PATTERN` (or exclude, include, hide, show, protect, risk, \
                     with ! s r p), `!`, `merge FILE` or `dir-merge NAME` (with - + n e s r p)";

/// What `r` says.
pub(super) fn word(r: &str) -> Result<Word<'_>, String> {
    let (head, arg) = match r.find([' ', '_']) {
        Some(i) => (&r[..i], Some(&r[i + 1..])),
        None => (r, None),
    };
    let long = |name: &str| LONG.iter().find(|(n, _)| *n == name).map(|(_, c)| *c);
    let (kind, mods) = match head.split_once(',') {
        Some((name, mods)) if long(name).is_some() => (long(name), mods),
        _ if long(head).is_some() => (long(head), ""),
        _ => {
            let mut c = head.chars();
            let k = c.next();
            (k, c.as_str().strip_prefix(',').unwrap_or(c.as_str()))
        }
    };
    let kind = kind.filter(|k| "-+.:HSPR!".contains(*k)).ok_or_else(|| TAKES.to_string())?;
    if kind == '!' {
        return match (mods, arg) {
            ("", None) => Ok(Word::Clear),
            _ => Err("`!` (clear) takes nothing after it".into()),
        };
    }
    let given = arg.filter(|a| !a.is_empty());
    let arg = || given.ok_or_else(|| format!("`{head}` needs a pattern or a name after it"));
    match kind {
        '.' | ':' => {
            let how = merge_mods(mods)?;
            // rsync's `:C` reads `.cvsignore` unless named.
            let name = match (how.cvs, given) {
                (true, None) => ".cvsignore",
                _ => arg()?,
            };
            Ok(if kind == '.' { Word::Merge(how, name) } else { Word::DirMerge(how, name) })
        }
        '-' if mods == "C" => match given {
            None => Ok(Word::Cvs),
            Some(_) => Err("`-C` (the global CVS excludes) takes nothing after it".into()),
        },
        _ => {
            let mut how = rule_mods(mods)?;
            let arg = arg()?;
            let (include, side) = match kind {
                '-' => (false, None),
                '+' => (true, None),
                'H' => (false, Some(Side::Sender)),
                'S' => (true, Some(Side::Sender)),
                'P' => (false, Some(Side::Receiver)),
                _ => (true, Some(Side::Receiver)),
            };
            if let Some(side) = side {
                if how.side != Side::Both {
                    return Err(format!("`{kind}` gives its side: no s or r after it"));
                }
                how.side = side;
            }
            Ok(Word::Rule(include, how, arg))
        }
    }
}

fn refused(m: char) -> String {
    let what = match m {
        '/' => "`/` (a pattern on the absolute path)",
        'C' => "`C` (CVS's rules) other than as `-C` or on a merge",
        'w' => "`w` (words split on blanks) other than on a merge",
        _ => return format!("no modifier {m:?}: {TAKES}"),
    };
    format!("rsync's modifier {what} is not supported by ddftp")
}

fn side(how: &mut How, s: Side) {
    how.side = if how.side == Side::Both || how.side == s { s } else { Side::Both };
}

fn rule_mods(mods: &str) -> Result<How, String> {
    let mut how = How::default();
    let mut both = false;
    for m in mods.chars() {
        match m {
            '!' => how.negate = true,
            'p' => how.perishable = true,
            'x' => how.xattr = true,
            's' | 'r' => {
                let s = if m == 's' { Side::Sender } else { Side::Receiver };
                both |= how.side != Side::Both && how.side != s;
                side(&mut how, s);
            }
            m => return Err(refused(m)),
        }
    }
    // `sr`: both sides, as without either.
    if both {
        how.side = Side::Both;
    }
    Ok(how)
}

fn merge_mods(mods: &str) -> Result<MergeHow, String> {
    let mut how = MergeHow::default();
    let mut both = false;
    for m in mods.chars() {
        match m {
            '-' | '+' => {
                if how.plain.is_some_and(|p| p != (m == '+')) {
                    return Err("a merge takes `-` or `+`, not both".into());
                }
                how.plain = Some(m == '+');
            }
            'n' => how.no_inherit = true,
            'e' => how.exclude_self = true,
            'w' => how.word_split = true,
            'C' => how.cvs = true,
            'p' => how.rules.perishable = true,
            's' | 'r' => {
                let s = if m == 's' { Side::Sender } else { Side::Receiver };
                both |= how.rules.side != Side::Both && how.rules.side != s;
                side(&mut how.rules, s);
            }
            m => return Err(refused(m)),
        }
    }
    if both {
        how.rules.side = Side::Both;
    }
    if how.cvs {
        // rsync: `C` says the rest; `-`, `+` or a side beside it is refused.
        if how.plain.is_some() || how.rules.side != Side::Both {
            return Err("`C` takes no `-`, `+`, `s` or `r` beside it".into());
        }
        (how.plain, how.word_split, how.no_inherit) = (Some(false), true, true);
    }
    Ok(how)
}

/// The lines of a rules file that hold a rule, numbered from 1: blank
/// lines and `#` or `;` comments skipped, trailing blanks cut.
pub(super) fn rule_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .map(str::trim_end)
        .enumerate()
        .filter(|(_, l)| !l.is_empty() && !l.starts_with(['#', ';']))
        .map(|(n, l)| (n + 1, l))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn how(side: Side, negate: bool, perishable: bool) -> How {
        How { side, negate, perishable, ..How::default() }
    }

    #[test]
    fn short_and_long_names_with_their_modifiers() {
        let plain = How::default();
        assert_eq!(word("- a b"), Ok(Word::Rule(false, plain, "a b")));
        assert_eq!(word("-_*.o"), Ok(Word::Rule(false, plain, "*.o")));
        assert_eq!(word("exclude,!p x"), Ok(Word::Rule(false, how(Side::Both, true, true), "x")));
        assert_eq!(word("-! */"), Ok(Word::Rule(false, how(Side::Both, true, false), "*/")));
        assert_eq!(word("+,s x"), Ok(Word::Rule(true, how(Side::Sender, false, false), "x")));
        assert_eq!(word("H x"), Ok(Word::Rule(false, how(Side::Sender, false, false), "x")));
        assert_eq!(word("show x"), Ok(Word::Rule(true, how(Side::Sender, false, false), "x")));
        assert_eq!(word("P x"), Ok(Word::Rule(false, how(Side::Receiver, false, false), "x")));
        assert_eq!(word("risk,p x"), Ok(Word::Rule(true, how(Side::Receiver, false, true), "x")));
        assert_eq!(word("-sr x"), Ok(Word::Rule(false, plain, "x")), "both sides, as without");
        assert_eq!(word("!"), Ok(Word::Clear));
        assert_eq!(word("clear"), Ok(Word::Clear));
        let m = MergeHow { plain: Some(false), no_inherit: true, exclude_self: true, ..Default::default() };
        assert_eq!(word(":-ne .gitignore"), Ok(Word::DirMerge(m, ".gitignore")));
        assert_eq!(word("dir-merge,ne- .gitignore"), Ok(Word::DirMerge(m, ".gitignore")));
        assert_eq!(word(". /etc/rules"), Ok(Word::Merge(MergeHow::default(), "/etc/rules")));
        let cvs = MergeHow { plain: Some(false), no_inherit: true, word_split: true, cvs: true, ..Default::default() };
        assert_eq!(word(":C"), Ok(Word::DirMerge(cvs, ".cvsignore")));
        assert_eq!(word("dir-merge,C .ignore"), Ok(Word::DirMerge(cvs, ".ignore")));
        assert_eq!(word("-C"), Ok(Word::Cvs));
        let w = MergeHow { word_split: true, plain: Some(true), ..Default::default() };
        assert_eq!(word(":+w .keep"), Ok(Word::DirMerge(w, ".keep")));
        let x = How { xattr: true, ..How::default() };
        assert_eq!(word("-x security.*"), Ok(Word::Rule(false, x, "security.*")));
        assert_eq!(word("-xr *"), Ok(Word::Rule(false, How { side: Side::Receiver, ..x }, "*")));
        for bad in [
            "-/ x", ":x .f", "-C x", "+C", ":-C", ":Cs x", "-w x", "- ", "-", "! x", "Q x", "", "include", ":+- x",
            "Hs x",
        ] {
            assert!(word(bad).is_err(), "{bad:?} refused");
        }
        assert!(word("-/ x").unwrap_err().contains("not supported"));
    }

    #[test]
    fn a_merge_rule_sets_what_its_lines_say() {
        let m = merge_mods("-r").unwrap();
        assert_eq!(m.line("!"), Ok(Word::Rule(false, how(Side::Receiver, false, false), "!")), "a pattern");
        let m = merge_mods("sp").unwrap();
        assert_eq!(m.line("+ x"), Ok(Word::Rule(true, how(Side::Sender, false, true), "x")));
        assert!(m.line("P x").is_err(), "the merge gives the sides");
        assert_eq!(MergeHow::default().line("!"), Ok(Word::Clear));
        let c = merge_mods("C").unwrap();
        assert_eq!(c.words(" *.o  core\t! x "), ["*.o", "core", "!", "x"]);
        assert_eq!(c.line("!"), Ok(Word::Clear), "a `!` word clears a .cvsignore");
        assert_eq!(c.line("+x"), Ok(Word::Rule(false, How::default(), "+x")), "every other word a pattern");
    }

    proptest::proptest! {
        /// Any line is a rule or refused, never a panic; a rule written
        /// back with its modifiers reads the same.
        #[test]
        fn any_line_is_a_rule_or_refused(r in "[-+.:HSPR!a-z,_ /*]{0,16}") {
            if let Ok(Word::Rule(inc, h, p)) = word(&r) {
                let back = format!("{}{} {p}", if inc { '+' } else { '-' }, h.letters());
                proptest::prop_assert_eq!(word(&back), Ok(Word::Rule(inc, h, p)));
            }
            let _ = MergeHow { plain: None, ..Default::default() }.line(&r);
        }
    }

    #[test]
    fn modifiers_written_back_read_the_same() {
        for r in ["-!ps x", "+r x", "-x! user.*", ":-ne .f", ".+s f", "H x", ":C .c", ":Ce .c", ":-w .w", "-C"] {
            let back = match word(r).unwrap() {
                Word::Rule(inc, h, p) => format!("{}{} {p}", if inc { '+' } else { '-' }, h.letters()),
                Word::DirMerge(h, n) => format!(":{} {n}", h.letters()),
                Word::Merge(h, n) => format!(".{} {n}", h.letters()),
                Word::Clear => "!".into(),
                Word::Cvs => "-C".into(),
            };
            assert_eq!(word(&back).unwrap(), word(r).unwrap(), "{r} as {back}");
        }
    }
}
