//! How long the checks a delta update must make cost on this machine, for
//! the delta benchmark's floor: one BLAKE3 pass (every chunk placed is
//! checked against its hash) and one SHA-256 pass (the whole file against
//! the mirrors' digest) over FILE, each on one core, with the crates ddftp
//! uses. Prints "BLAKE3_SECONDS SHA256_SECONDS"; the file is read into
//! memory first (its reading is counted in the copy, not here).

use sha2::Digest;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: hash_cost FILE");
        std::process::exit(2);
    };
    let data = match std::fs::read(&path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("hash_cost: {path}: {e}");
            std::process::exit(1);
        }
    };
    let t = std::time::Instant::now();
    // In chunks as the manifest has them (256 KiB for a 1 GiB file).
    for c in data.chunks(256 << 10) {
        std::hint::black_box(blake3::hash(c));
    }
    let b3 = t.elapsed().as_secs_f64();
    let t = std::time::Instant::now();
    std::hint::black_box(sha2::Sha256::digest(&data));
    let sha = t.elapsed().as_secs_f64();
    println!("{b3:.3} {sha:.3}");
}
