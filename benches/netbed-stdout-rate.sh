#!/usr/bin/env bash
# Benchmark: `get -o -` and `--limit-rate` on netbed. 4 mirrors (320/240/
# 160/80 mbit: 95.6 MB/s of goodput together), a 512 MiB file:
#   file      get -o FILE                         (the reference)
#   stdout    get -o - | sha256sum                (default 256 MiB window)
#   limit     get -o FILE --limit-rate RATE       (RATE default 40MB)
# Medians of RUNS runs; outputs checked against the source's SHA-256.
#
# Usage (root): benches/netbed-stdout-rate.sh [RUNS] [RATE]
# Writes benches/results/netbed-stdout-rate-<UTC date>.md.
set -euo pipefail

RUNS=${1:-3}
RATE=${2:-40MB}
TOP=$(cd "$(dirname "$0")/.." && pwd)
NB=$(cd "$TOP/../shared/testbed" && pwd)/netbed
BED=dds
WORK=${WORK:-/tmp/ddftp-outage}
SIZE=$((512 * 1024 * 1024))
RATES=(320 240 160 80)
M=${#RATES[@]}
log() { echo "[$(date +%T)] $*" >&2; }

cd "$TOP"
cargo build --release -q --bins
DDFTP=$TOP/target/release/ddftp
DDFTPD=$TOP/target/release/ddftpd
cleanup() {
  pkill -f "ddftpd --root $WORK/data --listen 10.77" 2>/dev/null || true
  "$NB" down $BED 2>/dev/null || true
}
trap cleanup EXIT
cleanup
"$NB" up $BED --mirrors "$(printf '%smbit,' "${RATES[@]}" | sed 's/,$//')" >/dev/null
mkdir -p "$WORK/data" "$WORK/out"
[ "$(stat -c %s "$WORK/data/big.bin" 2>/dev/null || echo 0)" = "$SIZE" ] || head -c $SIZE /dev/urandom > "$WORK/data/big.bin"
"$DDFTPD" index "$WORK/data" >/dev/null 2>&1
want=$(sha256sum "$WORK/data/big.bin" | cut -c1-64)
for i in $(seq 1 $M); do
  "$NB" exec $BED-m$i -- "$DDFTPD" --root "$WORK/data" --listen 10.77.$i.2:7400 >/dev/null 2>&1 &
done
sleep 0.5
mirrors=$(for i in $(seq 1 $M); do printf '10.77.%s.2,' "$i"; done | sed 's/,$//')
out=$WORK/out/big.bin
declare -A secs
for r in $(seq 1 "$RUNS"); do
  for c in file stdout limit; do
    rm -f "$out" "$out".*
    t0=$(date +%s.%N)
    # The clock stops when the command does; a file is hashed after.
    case $c in
      file) "$NB" exec $BED-c -- "$DDFTP" get big.bin -m "$mirrors" -o "$out" -q; t1=$(date +%s.%N); got=$(sha256sum "$out" | cut -c1-64) ;;
      stdout) got=$("$NB" exec $BED-c -- bash -c "'$DDFTP' get big.bin -m '$mirrors' -o - -q | sha256sum" | cut -c1-64); t1=$(date +%s.%N) ;;
      limit) "$NB" exec $BED-c -- "$DDFTP" get big.bin -m "$mirrors" -o "$out" -q --limit-rate "$RATE"; t1=$(date +%s.%N); got=$(sha256sum "$out" | cut -c1-64) ;;
    esac
    [ "$got" = "$want" ] || { log "$c run $r: WRONG OUTPUT"; exit 1; }
    s=$(python3 -c "print(round($t1 - $t0, 3))")
    secs[$c]="${secs[$c]:-} $s"
    log "$c run $r: $s s"
  done
done
stamp=$(date -u +%Y-%m-%dT%H%MZ)
md="$TOP/benches/results/netbed-stdout-rate-$stamp.md"
python3 - "$SIZE" "$RATE" "$RUNS" "${secs[file]}" "${secs[stdout]}" "${secs[limit]}" > "$md" <<'PY'
import sys, statistics as st
size, rate, runs = int(sys.argv[1]), sys.argv[2], sys.argv[3]
f, s, l = ([float(x) for x in a.split()] for a in sys.argv[4:7])
mult = {"k": 1e3, "M": 1e6, "G": 1e9}
r = float(rate.rstrip("B").rstrip("kMG")) * mult.get(rate.rstrip("B")[-1], 1)
print(f"# netbed -o - and --limit-rate\n\n`benches/netbed-stdout-rate.sh {runs} {rate}`: 4 mirrors 320/240/160/80 mbit (95.6 MB/s goodput), 512 MiB; wall time of the command (SHA-256 of every output checked).\n")
print("| case | runs (s) | median s | MB/s | ratio |")
print("|---|---|---|---|---|")
mf = st.median(f)
for name, v in [("file (-o FILE)", f), ("stdout (-o - \\| sha256sum)", s)]:
    m = st.median(v)
    print(f"| {name} | {', '.join(map(str, v))} | {m:.2f} | {size/m/1e6:.1f} | {mf/m:.3f} of file |")
m = st.median(l)
print(f"| --limit-rate {rate} | {', '.join(map(str, l))} | {m:.2f} | {size/m/1e6:.1f} | {size/m/r:.3f} of the cap |")
PY
cat "$md"
