#!/usr/bin/env bash
# Benchmark: a mirror that goes away and comes back. 4 mirrors (320/240/
# 160/80 mbit), a 512 MiB file; mirror 1's server is killed at KILL s and
# started again on the same address at BACK s. In the same run:
#   ddftp        from ddftpd mirrors, without the outage (the reference)
#   ddftp-out    from ddftpd mirrors, with it (mirror 1 rejoins)
#   ddftp-http   from nginx mirrors, with it
#   aria2c       from the same nginx mirrors, with it (--max-tries 0
#                --retry-wait 1: it asks again every second)
# and `ddftp simulate --fail KILL:1 --rejoin T:1` (T: when get saw it back)
# with the links' goodput. Medians of RUNS runs; every output byte-exact.
#
# Usage (root): benches/netbed-outage.sh [RUNS] [KILL] [BACK]
# Writes benches/results/netbed-outage-<UTC date>.{md,json}.
set -euo pipefail

RUNS=${1:-3}
KILL=${2:-2}
BACK=${3:-3}
TOP=$(cd "$(dirname "$0")/.." && pwd)
NB=$(cd "$TOP/../shared/testbed" && pwd)/netbed
. "$TOP/benches/common.sh"
BED=ddo
WORK=${WORK:-/tmp/ddftp-outage}
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
  pkill -f "nginx -c $WORK" 2>/dev/null || true
  "$NB" down $BED 2>/dev/null || true
}
trap cleanup EXIT
cleanup
"$NB" up $BED --mirrors "$(printf '%smbit,' "${RATES[@]}" | sed 's/,$//')" >/dev/null

mkdir -p "$WORK/data" "$WORK/out"
if [ "$(stat -c %s "$WORK/data/big.bin" 2>/dev/null || echo 0)" != "$SIZE" ]; then
  log "generating $SIZE bytes"
  head -c $SIZE /dev/urandom > "$WORK/data/big.bin"
fi
"$DDFTPD" index "$WORK/data" >/dev/null 2>&1

ddftpd_on() { # I
  "$NB" exec $BED-m$1 -- "$DDFTPD" --root "$WORK/data" --listen 10.77.$1.2:7400 >>"$WORK/m$1.log" 2>&1 &
}
nginx_on() { # I
  local run=$WORK/ng$1
  mkdir -p "$run"
  nginx_conf "$run" 10.77.$1.2:8080 "$WORK/data" 1
  "$NB" exec $BED-m$1 -- nginx -c "$run/nginx.conf"
}
wait_port() { # I PORT
  for _ in $(seq 100); do "$NB" exec $BED-c -- bash -c "echo > /dev/tcp/10.77.$1.2/$2" 2>/dev/null && return 0; sleep 0.05; done
}
for i in $(seq 1 $M); do ddftpd_on "$i"; nginx_on "$i"; done
for i in $(seq 1 $M); do wait_port "$i" 7400; wait_port "$i" 8080; done

# Mirror 1 (ddftpd or nginx) away at KILL s, back at BACK s; when it was
# really gone and really listening again go to $WORK/outage (the start of
# a server through `netbed exec` takes a moment).
outage() { # ddftpd|nginx
  local t0 gone port
  t0=$(date +%s.%N)
  sleep "$KILL"
  case $1 in
    ddftpd) pkill -KILL -f "ddftpd --root $WORK/data --listen 10.77.1.2" ;;
    # The master and its workers (a worker alone keeps the socket).
    nginx) local m; m=$(cat "$WORK/ng1/nginx.pid"); pkill -KILL -P "$m" || true; kill -KILL "$m" || true ;;
  esac
  gone=$(date +%s.%N)
  sleep "$(python3 -c "print($BACK - $KILL)")"
  case $1 in ddftpd) ddftpd_on 1; port=7400 ;; nginx) rm -f "$WORK/ng1/nginx.pid"; nginx_on 1; port=8080 ;; esac
  wait_port 1 $port
  python3 -c "print($(date +%s.%N) - $gone)" > "$WORK/outage"
}

ddftpd_mirrors=$(for i in $(seq 1 $M); do printf '10.77.%s.2,' "$i"; done | sed 's/,$//')
http_urls=$(for i in $(seq 1 $M); do printf 'http://10.77.%s.2:8080/big.bin ' "$i"; done)
in_client() { "$NB" exec $BED-c -- "$@"; }

run_tool() { # TOOL -> seconds on stdout; out at $WORK/out/big.bin
  local out=$WORK/out/big.bin
  rm -f "$out" "$out".* "$WORK/get.json"
  local t0 t1 opid=""
  case $1 in
    ddftp-out) outage ddftpd & opid=$! ;;
    ddftp-http|aria2c) outage nginx & opid=$! ;;
  esac
  t0=$(date +%s.%N)
  case $1 in
    ddftp|ddftp-out) in_client env ${DDFTP_LOG:+DDFTP_LOG=$DDFTP_LOG} "$DDFTP" get big.bin --mirrors "$ddftpd_mirrors" -o "$out" -q --json >"$WORK/get.json" 2>"$WORK/get.err" || true ;;
    # shellcheck disable=SC2086
    ddftp-http) in_client "$DDFTP" get $http_urls -o "$out" -q --json >"$WORK/get.json" 2>"$WORK/get.err" || true ;;
    # shellcheck disable=SC2086
    aria2c) in_client aria2c -q -s4 -x1 -k1M --file-allocation=none --allow-overwrite=true --max-tries=0 --retry-wait=1 \
              -d "$WORK/out" -o big.bin $http_urls 2>"$WORK/get.err" || true ;;
  esac
  t1=$(date +%s.%N)
  [ -z "$opid" ] || wait "$opid" || true
  # The mirror is back for the next run.
  wait_port 1 7400; wait_port 1 8080
  cmp -s "$out" "$WORK/data/big.bin" || { log "$1: output differs"; echo "NaN"; return; }
  python3 -c "print($t1 - $t0)"
}

stamp=$(date -u +%Y-%m-%dT%H%MZ)
json="$TOP/benches/results/netbed-outage-$stamp.json"
tools=${TOOLS:-"ddftp ddftp-out ddftp-http aria2c"}
speeds=$(for r in "${RATES[@]}"; do python3 -c "print(round($r*1e6/8*1448/1514/$BS, 2))"; done | paste -sd,)
echo "[" > "$json"
first=1
for r in $(seq 1 "$RUNS"); do
  for t in $tools; do
    s=$(run_tool "$t")
    log "$t run $r: $s s"
    shares="null"; joined="null"; outage_s="null"
    [ "$t" = ddftp ] || outage_s=$(cat "$WORK/outage" 2>/dev/null || echo null)
    if [ "$t" = ddftp-out ] && [ -s "$WORK/get.json" ]; then
      shares=$(python3 -c "import json; j=json.load(open('$WORK/get.json')); print(json.dumps([p['share'] for p in j['producers']]))")
      joined=$(python3 -c "import json; j=json.load(open('$WORK/get.json')); print(sum(p['joined_bytes'] for p in j['producers']))")
    fi
    [ "$t" != ddftp-out ] || cp "$WORK/get.err" "$WORK/out-$r.err"
    [ $first = 1 ] || echo "," >> "$json"
    first=0
    echo "{\"tool\": \"$t\", \"run\": $r, \"seconds\": $s, \"shares\": $shares, \"joined_bytes\": $joined, \"outage\": $outage_s}" >> "$json"
  done
done
echo "]" >> "$json"
# The simulator with the same outage: back when ddftp's retry finds it
# (the first retry after the kill: 1 s).
sim=$("$DDFTP" simulate --blocks $((SIZE / BS)) --speeds "$speeds" --rtt-ms 1 --fail "$KILL:1" --rejoin "$(python3 -c "print(max($BACK, $KILL + 1.0))"):1" --json)
python3 - "$json" "$sim" "$RUNS" "$KILL" "$BACK" > "${json%.json}.md" <<'PY'
import json, sys, statistics as st
rows = json.load(open(sys.argv[1])); sim = json.loads(sys.argv[2])
runs, kill, back = sys.argv[3:6]
print(f"# netbed outage, {sys.argv[1].split('netbed-outage-')[1][:-5]}\n")
print(f"`benches/netbed-outage.sh {runs} {kill} {back}`: 4 mirrors 320/240/160/80 mbit, 512 MiB;")
print(f"mirror 1 killed at {kill} s, started again at {back} s. Medians of {runs} runs; every output byte-exact unless NaN.\n")
med = {}
for t in ["ddftp", "ddftp-out", "ddftp-http", "aria2c"]:
    v = [r["seconds"] for r in rows if r["tool"] == t and r["seconds"] == r["seconds"]]
    med[t] = st.median(v) if v else float("nan")
# What the outage should cost: mirror 1's goodput share (320 of 800 mbit)
# of the time it was away is lost, the others cannot make it up (not a
# strict bound: the measured outage includes starting the server).
share1 = 320 / 800
print("| tool | runs (s) | median s | vs ddftp without outage | outage measured (s) | expected: ref + share x outage (s) | vs expected |")
print("|---|---|---|---|---|---|---|")
for t, m in med.items():
    rs = [r for r in rows if r["tool"] == t]
    runs_s = ", ".join(f"{r['seconds']:.2f}" for r in rs)
    outs = [r["outage"] for r in rs if r.get("outage")]
    if outs:
        d = st.median(outs)
        bound = med["ddftp"] + share1 * d
        print(f"| {t} | {runs_s} | {m:.2f} | {m / med['ddftp']:.3f} | {d:.2f} | {bound:.2f} | {m / bound:.3f} |")
    else:
        print(f"| {t} | {runs_s} | {m:.2f} | {m / med['ddftp']:.3f} | | | |")
out = [r for r in rows if r["tool"] == "ddftp-out" and r["shares"]]
print("\nddftp-out shares (%) against `ddftp simulate --fail --rejoin` (sim makespan "
      f"{sim['makespan']:.2f} s, shares {'/'.join(f'{100*x:.1f}' for x in sim['server_share'])}):\n")
print("| run | shares | bytes after rejoin | max gap to sim (points) |")
print("|---|---|---|---|")
for r in out:
    gap = max(abs(a - b) for a, b in zip(r["shares"], sim["server_share"])) * 100
    print(f"| {r['run']} | {'/'.join(f'{100*x:.1f}' for x in r['shares'])} | {r['joined_bytes']} | {gap:.1f} |")
PY
cat "${json%.json}.md"
