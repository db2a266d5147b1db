//! The weak checksum of a chunk (rsync's rolling checksum): ddftpd sends
//! one per chunk of its manifest, and a client slides it over an older
//! copy one byte at a time to find chunks that moved by any number of
//! bytes. Only a hint: a chunk is taken only when its strong hash (the
//! manifest's) matches too.
//!
//! For bytes x_0..x_{L-1}: a = sum of x_i, b = sum of (L - i) x_i, both
//! mod 2^16; the sum is a | b << 16.

/// The weak checksum of `data`.
pub fn weak(data: &[u8]) -> u32 {
    let mut w = WeakSum::default();
    w.update(data);
    w.finish()
}

/// A weak checksum computed a piece at a time (a chunk read in pieces).
#[derive(Debug, Clone, Copy, Default)]
pub struct WeakSum {
    /// Sum of the bytes.
    a: u32,
    /// Sum of i * x_i (their index in the chunk).
    c: u32,
    n: u32,
}

/// Bytes summed as one block: with fixed weights 0..BLOCK the compiler
/// keeps the sums in vector registers (a byte at a time, each step waits
/// on the one before).
const BLOCK: usize = 32;

/// (sum of x_i, sum of i x_i) over `data`, wrapping: with AVX2 where the
/// CPU has it, 32 bytes a step (the weak sums of an older copy are, with
/// its hashes, most of what a delta update costs a core).
fn sums(data: &[u8]) -> (u32, u32) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { sums_avx2(data) };
    }
    sums_plain(data)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn sums_avx2(data: &[u8]) -> (u32, u32) {
    use std::arch::x86_64::*;
    // Per block of 32 bytes: the bytes' sum (`sad` against zero), the
    // weighted sum within the block (bytes times 0..31, pairs added, then
    // pairs of pairs), and the sum of the blocks before each block (whose
    // total gives the blocks' offsets' share: sum over blocks of 32 b a_b
    // is 32 ((n - 1) A - P)). All wrapping: the sums are wanted mod 2^32,
    // and every step is a ring operation.
    let w = _mm256_setr_epi8(
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29,
        30, 31,
    );
    let ones = _mm256_set1_epi16(1);
    let zero = _mm256_setzero_si256();
    let (mut va, mut vp, mut vc) = (zero, zero, zero);
    let blocks = data.chunks_exact(BLOCK);
    let rest = blocks.remainder();
    let n = (data.len() / BLOCK) as u64;
    for block in blocks {
        // SAFETY: `block` holds 32 bytes; an unaligned load.
        let x = unsafe { _mm256_loadu_si256(block.as_ptr().cast()) };
        vp = _mm256_add_epi64(vp, va);
        va = _mm256_add_epi64(va, _mm256_sad_epu8(x, zero));
        vc = _mm256_add_epi32(vc, _mm256_madd_epi16(_mm256_maddubs_epi16(x, w), ones));
    }
    let (mut a64, mut p64, mut c32) = ([0u64; 4], [0u64; 4], [0u32; 8]);
    // SAFETY: stores of 32 bytes into arrays of 32 bytes.
    unsafe {
        _mm256_storeu_si256(a64.as_mut_ptr().cast(), va);
        _mm256_storeu_si256(p64.as_mut_ptr().cast(), vp);
        _mm256_storeu_si256(c32.as_mut_ptr().cast(), vc);
    }
    let a = a64.iter().fold(0u64, |s, &x| s.wrapping_add(x));
    let p = p64.iter().fold(0u64, |s, &x| s.wrapping_add(x));
    let inner = c32.iter().fold(0u32, |s, &x| s.wrapping_add(x));
    let offsets = n.saturating_sub(1).wrapping_mul(a).wrapping_sub(p).wrapping_mul(BLOCK as u64);
    let (mut a, mut c) = (a as u32, (offsets as u32).wrapping_add(inner));
    let base = (n * BLOCK as u64) as u32;
    for (k, &x) in rest.iter().enumerate() {
        a = a.wrapping_add(u32::from(x));
        c = c.wrapping_add(base.wrapping_add(k as u32).wrapping_mul(u32::from(x)));
    }
    (a, c)
}

#[inline(always)]
fn sums_plain(data: &[u8]) -> (u32, u32) {
    let (mut a, mut c, mut base) = (0u32, 0u32, 0u32);
    let blocks = data.chunks_exact(BLOCK);
    let rest = blocks.remainder();
    for block in blocks {
        // At most 32 * 255 and 32 * 31 * 255: no overflow within a block.
        let (mut sa, mut sc) = (0u32, 0u32);
        for (k, &x) in block.iter().enumerate() {
            sa += u32::from(x);
            sc += k as u32 * u32::from(x);
        }
        a = a.wrapping_add(sa);
        c = c.wrapping_add(sc).wrapping_add(base.wrapping_mul(sa));
        base = base.wrapping_add(BLOCK as u32);
    }
    for (k, &x) in rest.iter().enumerate() {
        a = a.wrapping_add(u32::from(x));
        c = c.wrapping_add(base.wrapping_add(k as u32).wrapping_mul(u32::from(x)));
    }
    (a, c)
}

impl WeakSum {
    pub fn update(&mut self, data: &[u8]) {
        let (a, c) = sums(data);
        // This piece's indices start at n.
        self.c = self.c.wrapping_add(c).wrapping_add(self.n.wrapping_mul(a));
        self.a = self.a.wrapping_add(a);
        self.n = self.n.wrapping_add(data.len() as u32);
    }

    /// The checksum of everything given (b = L a - sum i x_i: mod 2^16
    /// arithmetic agrees with wrapping u32 arithmetic).
    pub fn finish(&self) -> u32 {
        let b = self.n.wrapping_mul(self.a).wrapping_sub(self.c);
        (self.a & 0xffff) | (b & 0xffff) << 16
    }
}

/// The weak checksum of a window of fixed length sliding over data.
#[derive(Debug, Clone, Copy)]
pub struct Rolling {
    a: u32,
    b: u32,
    len: u32,
}

impl Rolling {
    /// The window `data` (its length is the window's).
    pub fn new(data: &[u8]) -> Rolling {
        let len = data.len() as u32;
        // b = sum (L - i) x_i = L a - sum i x_i, exactly (mod 2^32).
        let (a, c) = sums(data);
        Rolling { a, b: len.wrapping_mul(a).wrapping_sub(c), len }
    }

    /// Slides the window one byte: `out` leaves at its start, `into`
    /// enters at its end.
    #[inline]
    pub fn roll(&mut self, out: u8, into: u8) {
        let (out, into) = (u32::from(out), u32::from(into));
        self.a = self.a.wrapping_sub(out).wrapping_add(into);
        self.b = self.b.wrapping_sub(self.len.wrapping_mul(out)).wrapping_add(self.a);
    }

    #[inline]
    pub fn sum(&self) -> u32 {
        (self.a & 0xffff) | (self.b & 0xffff) << 16
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_values() {
        assert_eq!(weak(b""), 0);
        // a = 97 + 98 + 99 = 294; b = 3*97 + 2*98 + 99 = 586.
        assert_eq!(weak(b"abc"), 294 | 586 << 16);
    }

    /// The sums a byte at a time, as the definition says.
    fn slow(data: &[u8]) -> (u32, u32) {
        let len = data.len() as u32;
        let (mut a, mut b) = (0u32, 0u32);
        for (i, &x) in data.iter().enumerate() {
            a = a.wrapping_add(u32::from(x));
            b = b.wrapping_add((len - i as u32).wrapping_mul(u32::from(x)));
        }
        (a, b)
    }

    #[test]
    fn long_data_wraps_the_sums_alike_with_avx2_and_without() {
        // 32 MiB of 0xff: the weighted sum passes 2^32 many times over.
        let data = vec![0xffu8; 32 << 20];
        assert_eq!(sums(&data), sums_plain(&data));
        let odd = &data[..(32 << 20) - 7];
        assert_eq!(sums(odd), sums_plain(odd));
    }

    proptest! {
        /// Summed by blocks, in pieces of any size, the checksum is the
        /// definition's; so is a fresh window's.
        #[test]
        fn block_sums_agree_with_the_definition(
            data in proptest::collection::vec(any::<u8>(), 0..5000),
            cut in 0usize..5000,
        ) {
            let (a, b) = slow(&data);
            let want = (a & 0xffff) | (b & 0xffff) << 16;
            prop_assert_eq!(weak(&data), want);
            prop_assert_eq!(sums(&data), sums_plain(&data), "with AVX2 and without");
            let mut w = WeakSum::default();
            let cut = cut.min(data.len());
            w.update(&data[..cut]);
            w.update(&data[cut..]);
            prop_assert_eq!(w.finish(), want);
            let r = Rolling::new(&data);
            prop_assert_eq!((r.a, r.b), (a, b));
        }


        /// Rolling over data gives, at every offset, the checksum of the
        /// window there; pieces give the checksum of the whole.
        #[test]
        fn rolling_agrees_with_the_window_s_checksum(
            data in proptest::collection::vec(any::<u8>(), 1..3000),
            len in 1usize..600,
            cut in 0usize..3000,
        ) {
            let len = len.min(data.len());
            let mut r = Rolling::new(&data[..len]);
            for o in 0..=data.len() - len {
                prop_assert_eq!(r.sum(), weak(&data[o..o + len]));
                if o + len < data.len() {
                    r.roll(data[o], data[o + len]);
                }
            }
            let cut = cut.min(data.len());
            let mut w = WeakSum::default();
            w.update(&data[..cut]);
            w.update(&data[cut..]);
            prop_assert_eq!(w.finish(), weak(&data));
        }
    }
}
