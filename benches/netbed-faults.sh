#!/usr/bin/env bash
# Benchmark: does `ddftp simulate` with a fault show what `ddftp get` does on
# netbed with the same speeds and fault? 4 mirrors (320/240/160/80 mbit), a
# 512 MiB file in 256 KiB blocks; at AT seconds:
#   fail     mirror 1's ddftpd is killed (SIGKILL: its connections reset)
#   stall    mirror 2's ddftpd is stopped (SIGSTOP: connected, silent)
#   corrupt  mirror 1's copy is overwritten ahead of where it reads (its
#            next block fails verification)
# then the same case in `ddftp simulate --fail/--stall/--corrupt AT:I` with
# the links' goodput in blocks per second. Prints each mirror's share and
# the Start counts of both, RUNS runs of get.
#
# Usage (root): benches/netbed-faults.sh [RUNS] [CASES] [AT]
#   CASES: comma list of fail,stall,corrupt (default all); AT default 3
# Writes benches/results/netbed-faults-<UTC date>.{md,json}.
set -euo pipefail

RUNS=${1:-3}
CASES=${2:-fail,stall,corrupt}
AT=${3:-3}
TOP=$(cd "$(dirname "$0")/.." && pwd)
NB=$(cd "$TOP/../shared/testbed" && pwd)/netbed
BED=ddf
WORK=${WORK:-/tmp/ddftp-faults}
SIZE=$((512 * 1024 * 1024))
BS=262144
RATES=(320 240 160 80)
M=${#RATES[@]}
log() { echo "[$(date +%T)] $*" >&2; }

cd "$TOP"
cargo build --release -q --bins
DDFTP=$TOP/target/release/ddftp
DDFTPD=$TOP/target/release/ddftpd

cleanup() {
  pkill -f "ddftpd --root $WORK" 2>/dev/null || true
  "$NB" down $BED 2>/dev/null || true
}
trap cleanup EXIT
"$NB" down $BED 2>/dev/null || true
"$NB" up $BED --mirrors "$(printf '%smbit,' "${RATES[@]}" | sed 's/,$//')" >/dev/null

mkdir -p "$WORK/out"
if [ "$(stat -c %s "$WORK/big.bin" 2>/dev/null || echo 0)" != "$SIZE" ]; then
  log "generating $SIZE bytes"
  head -c $SIZE /dev/urandom > "$WORK/big.bin"
fi
# Each mirror serves its own copy (same bytes, same mtime): the corrupt case
# overwrites mirror 1's alone.
fresh_copies() {
  for i in $(seq 1 $M); do
    mkdir -p "$WORK/m$i"
    cp --preserve=timestamps "$WORK/big.bin" "$WORK/m$i/big.bin"
    "$DDFTPD" index "$WORK/m$i" >/dev/null 2>&1
  done
}

start_servers() {
  for i in $(seq 1 $M); do
    "$NB" exec $BED-m$i -- "$DDFTPD" --root "$WORK/m$i" --listen 10.77.$i.2:7400 >"$WORK/m$i.log" 2>&1 &
  done
  for i in $(seq 1 $M); do
    for _ in $(seq 50); do "$NB" exec $BED-c -- bash -c "echo > /dev/tcp/10.77.$i.2/7400" 2>/dev/null && break; sleep 0.1; done
  done
}

stop_servers() {
  pkill -CONT -f "ddftpd --root $WORK" 2>/dev/null || true
  pkill -f "ddftpd --root $WORK" 2>/dev/null || true
  sleep 0.3
}

# The fault, AT seconds after get starts.
fault() {
  sleep "$AT"
  case $1 in
    fail) pkill -KILL -f "ddftpd --root $WORK/m1 " ;;
    stall) pkill -STOP -f "ddftpd --root $WORK/m2 " ;;
    # Mirror 1 reads its partition upward from 0: at AT s it is about
    # AT * 38 MB in; everything from 64 MiB on changes.
    corrupt) dd if=/dev/urandom of="$WORK/m1/big.bin" bs=1M seek=64 count=192 conv=notrunc status=none ;;
  esac
}

speeds=$(for r in "${RATES[@]}"; do python3 -c "print(round($r*1e6/8*1448/1514/$BS, 2))"; done | paste -sd,)
mirrors=$(for i in $(seq 1 $M); do printf '10.77.%s.2,' "$i"; done | sed 's/,$//')
stamp=$(date -u +%Y-%m-%dT%H%MZ)
json="$TOP/benches/results/netbed-faults-$stamp.json"
echo "[" > "$json"
first=1
IFS=, read -ra cases <<< "$CASES"
for c in "${cases[@]}"; do
  case $c in fail) flag="--fail $AT:1" ;; stall) flag="--stall $AT:2" ;; corrupt) flag="--corrupt $AT:1" ;; esac
  # shellcheck disable=SC2086
  sim=$("$DDFTP" simulate --blocks $((SIZE / BS)) --speeds "$speeds" --rtt-ms 1 $flag --json)
  for r in $(seq 1 "$RUNS"); do
    fresh_copies
    start_servers
    out=$WORK/out/big.bin
    rm -f "$out" "$out".*
    fault "$c" &
    fpid=$!
    "$NB" exec $BED-c -- "$DDFTP" get big.bin --mirrors "$mirrors" -o "$out" -q --json >"$WORK/get.json" 2>"$WORK/get.err" || true
    wait $fpid || true
    stop_servers
    ok=$(cmp -s "$out" "$WORK/big.bin" && echo true || echo false)
    log "$c run $r: byte-exact $ok"
    [ $first = 1 ] || echo "," >> "$json"
    first=0
    python3 - "$c" "$r" "$ok" "$WORK/get.json" "$sim" >> "$json" <<'EOF'
import json, sys
case, run, ok, path, sim = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "true", sys.argv[4], json.loads(sys.argv[5])
get = json.load(open(path))
shares = [p["share"] for p in get["producers"]]
print(json.dumps({"case": case, "run": run, "byte_exact": ok, "get_seconds": get["seconds"],
                  "get_starts": get["starts"], "get_shares": shares, "get_warnings": get["warnings"],
                  "sim_makespan": sim["makespan"], "sim_starts": sim["starts"], "sim_shares": sim["server_share"]}))
EOF
  done
done
echo "]" >> "$json"
python3 - "$json" "$CASES" "$AT" "$RUNS" > "${json%.json}.md" <<'EOF'
import json, sys
rows = json.load(open(sys.argv[1]))
print(f"# netbed faults, {sys.argv[1].split('netbed-faults-')[1][:-5]}\n")
print(f"`benches/netbed-faults.sh {sys.argv[4]} {sys.argv[2]} {sys.argv[3]}`: 4 mirrors 320/240/160/80 mbit, 512 MiB,")
print("fault at", sys.argv[3], "s; shares in % of the bytes; sim = `ddftp simulate` with the same fault.\n")
print("| case | run | exact | get s | sim s | get Starts | sim Starts | get shares | sim shares | max share gap (points) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    gap = max(abs(a - b) for a, b in zip(r["get_shares"], r["sim_shares"])) * 100
    fmt = lambda v: "/".join(f"{100*x:.1f}" for x in v)
    print(f"| {r['case']} | {r['run']} | {r['byte_exact']} | {r['get_seconds']:.2f} | {r['sim_makespan']:.2f} | "
          f"{r['get_starts']} | {r['sim_starts']} | {fmt(r['get_shares'])} | {fmt(r['sim_shares'])} | {gap:.1f} |")
EOF
cat "${json%.json}.md"
