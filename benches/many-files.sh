#!/usr/bin/env bash
# Benchmark: 1,000 small files (1 KB) from 2 local ddftpd on loopback,
# fetched by one `ddftp get -i LIST -d DIR` against one `ddftp get` per
# file (and `aria2c -i` with the same list from nginx as the anchor).
# Reports the median of RUNS rounds: seconds each and the ratio (a get
# each / -i), the figure issue 43 asks to be at least 5.
#
# Usage: benches/many-files.sh [RUNS]
# Writes benches/results/many-files-<UTC date>.md.
set -euo pipefail

RUNS=${1:-5}
TOP=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-/tmp/ddftp-bench/many}
N=1000
. "$(dirname "$0")/common.sh"
log() { echo "[$(date +%T)] $*" >&2; }

cd "$TOP"
cargo build --release -q -p ddftp-cli
DDFTP=$TOP/target/release/ddftp
DDFTPD=$TOP/target/release/ddftpd
rm -rf "$WORK" && mkdir -p "$WORK/data" "$WORK/run"
python3 - "$WORK/data" "$N" <<'PY'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    with open(f"{d}/s{i}", "wb") as f:
        f.write(os.urandom(1000))
PY
"$DDFTPD" --root "$WORK/data" --index "$WORK/run/i1" --listen 127.0.0.1:7611 -q &
P1=$!
"$DDFTPD" --root "$WORK/data" --index "$WORK/run/i2" --listen 127.0.0.1:7612 -q &
P2=$!
nginx_conf "$WORK/run" 127.0.0.1:7613 "$WORK/data" 2
nginx -c "$WORK/run/nginx.conf"
trap 'kill $P1 $P2 2>/dev/null; nginx -c "$WORK/run/nginx.conf" -s stop 2>/dev/null' EXIT
sleep 1
for i in $(seq 0 $((N - 1))); do echo "s$i"; done >"$WORK/list"
for i in $(seq 0 $((N - 1))); do echo "http://127.0.0.1:7613/s$i"; done >"$WORK/urls"
M=127.0.0.1:7611,127.0.0.1:7612

now() { date +%s.%N; }
# The mirrors hash each file on its first Stat: one pass first, so every
# way timed asks mirrors that know the files.
"$DDFTP" get -i "$WORK/list" -m $M -d "$WORK/warm" -q
: >"$WORK/times"
for r in $(seq 1 "$RUNS"); do
  rm -rf "$WORK/o"; mkdir -p "$WORK/o/each"
  # What the previous way wrote is on disk before the next is timed.
  sync
  t0=$(now); "$DDFTP" get -i "$WORK/list" -m $M -d "$WORK/o/list" -q; t1=$(now)
  [ "$(ls "$WORK/o/list" | wc -l)" = $N ]
  sync
  t2=$(now)
  for i in $(seq 0 $((N - 1))); do "$DDFTP" get "s$i" -m $M -o "$WORK/o/each/s$i" -q; done
  t3=$(now)
  sync
  t4=$(now); aria2c -q -i "$WORK/urls" -d "$WORK/o/aria2" -j 4 --allow-overwrite=true; t5=$(now)
  echo "$(echo "$t1 - $t0" | bc) $(echo "$t3 - $t2" | bc) $(echo "$t5 - $t4" | bc)" >>"$WORK/times"
  log "round $r: $(tail -1 "$WORK/times")"
done

OUT=benches/results/many-files-$(date -u +%Y-%m-%dT%H%MZ).md
python3 - "$WORK/times" "$RUNS" >"$OUT" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
med = lambda k: statistics.median(r[k] for r in rows)
ratios = sorted(r[1] / r[0] for r in rows)
print(f"# 1,000 files of 1 KB from 2 ddftpd on loopback, {sys.argv[2]} rounds\n")
print("Command: `benches/many-files.sh " + sys.argv[2] + "`\n")
print("| | median s | min | max |\n| --- | --- | --- | --- |")
for k, name in [(0, "`ddftp get -i LIST -m A,B -d DIR`"), (1, "a `ddftp get PATH -m A,B` each"), (2, "`aria2c -i URLS -j 4` (nginx)")]:
    v = [r[k] for r in rows]
    print(f"| {name} | {med(k):.2f} | {min(v):.2f} | {max(v):.2f} |")
print(f"\nRatio a get each / -i: median {statistics.median(ratios):.1f}x (each round: {', '.join(f'{x:.1f}' for x in ratios)}).")
PY
cat "$OUT"
