#!/usr/bin/env bash
# Benchmark: `ddftp get` on loopback, unshaped: 2 local ddftpd, a 1 GiB
# page-cached file written to disk, against aria2c -x4 and curl from nginx.
# Each output is deleted and synced after its run (keeping them all would
# push the machine into page reclaim and time that instead).
# Reports medians of RUNS runs: wall seconds, GB/s, client CPU seconds
# (user + sys), client peak RSS; and ddftp's peak RSS for a 2 GiB download.
#
# Usage (root): benches/loopback-get.sh [RUNS]
# Writes benches/results/loopback-get-<UTC date>.{md,json}.
set -euo pipefail

RUNS=${1:-3}
TOP=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-/tmp/ddftp-bench/lo}
GIB=$((1024 * 1024 * 1024))

. "$(dirname "$0")/common.sh"
log() { echo "[$(date +%T)] $*" >&2; }
for p in aria2 nginx-light curl time python3; do
  dpkg -s $p >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $p >/dev/null; }
done

cd "$TOP"
cargo build --release -q --bins
DDFTP=$TOP/target/release/ddftp
DDFTPD=$TOP/target/release/ddftpd

mkdir -p "$WORK/data" "$WORK/out" "$WORK/run"
for n in 1 2; do
  f=$WORK/data/f${n}g.bin
  [ "$(stat -c %s "$f" 2>/dev/null || echo 0)" = $((n * GIB)) ] || { log "generating $f"; head -c $((n * GIB)) /dev/urandom >"$f"; }
done
sync  # flush the generated data so its writeback does not land in a timed run
SHA1=$(sha256sum "$WORK/data/f1g.bin" | cut -d' ' -f1)
"$DDFTPD" index "$WORK/data" >&2  # digests ahead of time, as an operator would

pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; nginx -c "$WORK/run/nginx.conf" -s stop 2>/dev/null || true; }
trap cleanup EXIT
for port in 7601 7602; do
  "$DDFTPD" --root "$WORK/data" --listen 127.0.0.1:$port >"$WORK/run/ddftpd-$port.log" 2>&1 &
  pids+=($!)
done
run=$WORK/run
nginx_conf "$run" 127.0.0.1:8601 "$WORK/data" 2
nginx -c "$run/nginx.conf"
sleep 1

N=0
results=()
measure() { # label file cmd... (OUT in the command is replaced by a fresh output path)
  local label=$1 file=$2; shift 2
  local rows=()
  for r in $(seq 1 "$RUNS"); do
    N=$((N + 1)); local out=$WORK/out/o$N
    cat "$WORK/data/$file" >/dev/null
    local args=(); for a in "$@"; do args+=("${a//OUT/$out}"); done
    /usr/bin/time -f "%e %U %S %M" -o "$WORK/run/time" "${args[@]}" >/dev/null
    rows+=("$(cat "$WORK/run/time")")
    if [ "$file" = f1g.bin ]; then
      [ "$(sha256sum "$out" | cut -d' ' -f1)" = "$SHA1" ] || { log "WRONG OUTPUT from $label"; exit 1; }
    fi
    rm -f "$out"
    sync
    sleep 1
  done
  results+=("$(python3 -c "
import json, statistics, sys
rows = [list(map(float, r.split())) for r in sys.argv[3:]]
size = int(sys.argv[2])
wall = statistics.median(r[0] for r in rows)
cpu = statistics.median(r[1] + r[2] for r in rows)
rss = max(r[3] for r in rows) / 1024
print(json.dumps({'tool': sys.argv[1], 'bytes': size, 'wall_s': wall, 'GBps': size / wall / 1e9, 'client_cpu_s': cpu, 'peak_rss_MiB': rss, 'runs': rows}))
" "$label" "$(stat -c %s "$WORK/data/$file")" "${rows[@]}")")
  log "$label: ${rows[*]}"
}

M2=127.0.0.1:7601,127.0.0.1:7602
measure "ddftp (2 ddftpd)" f1g.bin "$DDFTP" get f1g.bin --mirrors $M2 -o OUT -q
measure "ddftp --no-verify (2 ddftpd)" f1g.bin "$DDFTP" get f1g.bin --mirrors $M2 -o OUT -q --no-verify
measure "ddftp 1MiB blocks (2 ddftpd)" f1g.bin "$DDFTP" get f1g.bin --mirrors $M2 -o OUT -q --block-size 1MiB
measure "curl (1 nginx)" f1g.bin curl -s -o OUT http://127.0.0.1:8601/f1g.bin
measure "aria2c -x4 (nginx)" f1g.bin aria2c -q -x4 -s4 --file-allocation=none --allow-overwrite=true -d / -o OUT http://127.0.0.1:8601/f1g.bin
measure "ddftp 2 GiB (2 ddftpd)" f2g.bin "$DDFTP" get f2g.bin --mirrors $M2 -o OUT -q

stamp=$(date -u +%Y-%m-%dT%H%MZ)
mkdir -p "$TOP/benches/results"
python3 - "$TOP/benches/results/loopback-get-$stamp" "$stamp" "$RUNS" "${results[@]}" <<'PY'
import json, sys
base, stamp, runs = sys.argv[1:4]
res = [json.loads(x) for x in sys.argv[4:]]
json.dump({"when": stamp, "runs_per_tool": int(runs), "results": res}, open(base + ".json", "w"), indent=1)
with open(base + ".md", "w") as f:
    f.write(f"# loopback get benchmark, {stamp}\n\nCommand: `benches/loopback-get.sh {runs}` (root). 127.0.0.1, no shaping, "
            "2 ddftpd (or nginx with 2 workers) and the client on the same 2 cores; the source is page-cached (read once "
            "before each run), the output is a fresh file on disk, removed and synced outside the timing. Medians of "
            f"{runs} runs; peak RSS is the maximum over runs (GNU time).\n\n")
    f.write("| tool | bytes | wall s | GB/s | client CPU s | client peak RSS MiB |\n|---|---|---|---|---|---|\n")
    for r in res:
        f.write(f"| {r['tool']} | {r['bytes']} | {r['wall_s']:.2f} | {r['GBps']:.2f} | {r['client_cpu_s']:.2f} | {r['peak_rss_MiB']:.1f} |\n")
print(open(base + ".md").read())
PY
