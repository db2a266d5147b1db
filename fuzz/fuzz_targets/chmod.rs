//! `--chmod` of any text: read or refused without a panic, and a change
//! read keeps an entry's type bits and stays within the mode's bits.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&m, text)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(text) else { return };
    let mut c = ddftp::archive::chmod::Chmod::default();
    if c.add(text, u32::from(m) & 0o777).is_ok() {
        for (mode, dir) in [(0o100000 | u32::from(m) * 16, false), (0o040000 | u32::from(m), true)] {
            let t = c.tweak(mode, dir);
            assert_eq!(t & !0o7777, mode & !0o7777, "{text:?} on {mode:o}");
        }
    }
});
