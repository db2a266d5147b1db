#!/usr/bin/env bash
# Benchmark: one file onto N nodes (`ddftp get --peers ... --share-listen`,
# every receiver serving what it has verified) against N separate
# `ddftp get`s and N separate aria2c runs, on netbed --cluster: 2 mirrors
# at 320mbit, N client hosts at 400mbit each way, 512 MiB, N = 1..4.
#
# Bound: max(S/r, S/U, N*S/(U + N*r)) with goodput 0.956 of the tbf rate
# (r = 47.8 MB/s a node, U = 76.5 MB/s the mirrors): S/r for every N here,
# 11.2 s. Separate runs share U: N*S/U once N*r > U.
#
# Cases: share (N = 1..4), separate ddftp gets, separate aria2c (nginx on
# the mirrors), "http": --peers from the two web servers alone with the
# file's Metalink (copies from their access logs), "slow": N = 4 with
# client 4's link at 100mbit (the
# others must not be held back to it), and "tree": `ddftp archive --peers`
# of a tree (the file cut in 8 files, and 4,096 files of 4 KiB) onto
# N = 1..4 (copies: the mirrors' upload over the tree's bytes).
#
# Each run starts every receiver at once; "all" is the time until the last
# receiver has its verified copy (its report's seconds plus the start
# spread), the mirrors' upload comes from their ddftpd metrics (share and
# ddftp cases) in copies of the file. Outputs on tmpfs.
#
# Usage (root): benches/netbed-fan-out.sh [RUNS] [CASES]
#   NS="2 3": only these N; LOGS=DIR: receivers run with -v, their logs
#   kept as DIR/CASE-nN-rRUN-cJ.err
#   TCP_CC=reno: the hosts' TCP congestion control (default: this machine's;
#   one not in net.ipv4.tcp_allowed_congestion_control must be added there)
#   BIN=DIR: ddftp and ddftpd from DIR instead of this tree's build
#   PIECE=BYTES: the http case's Metalink pieces (default 262144; over
#   16 MiB they are checked, and passed on, once whole)
#   CASES: comma list of share, separate, aria2c, http, slow, tree (default:
#   all but http)
# Writes benches/results/netbed-fan-out-<UTC date>.{md,json}.
set -euo pipefail

RUNS=${1:-3}
CASES=${2:-share,separate,aria2c,slow,tree}
TOP=$(cd "$(dirname "$0")/.." && pwd)
. "$TOP/benches/common.sh"
NB=$(cd "$TOP/../shared/testbed" && pwd)/netbed
BED=fo
WORK=${WORK:-/tmp/ddftp-fan-out}
OUT=${OUT:-/dev/shm/ddftp-fan-out}
SIZE=$((512 << 20))
log() { echo "[$(date +%T)] $*" >&2; }

cd "$TOP"
# BIN=DIR: ddftp and ddftpd from DIR (an A/B against another build).
[ -n "${BIN:-}" ] || cargo build --release -q --bins
BIN=${BIN:-$TOP/target/release}
DDFTP=$BIN/ddftp
DDFTPD=$BIN/ddftpd
mkdir -p "$WORK/data" "$WORK/run" "$OUT"
chmod 755 "$WORK" "$WORK/data"
[ "$(stat -c %s "$WORK/data/big.bin" 2>/dev/null || echo 0)" = $SIZE ] || head -c $SIZE /dev/urandom >"$WORK/data/big.bin"
if [[ ,$CASES, == *,tree,* ]] && [ ! -d "$WORK/data/tree" ]; then
  mkdir -p "$WORK/data/tree.new/small"
  split -n 8 -d "$WORK/data/big.bin" "$WORK/data/tree.new/part-"
  head -c $((4096 * 4096)) /dev/urandom | split -b 4096 -d -a 4 - "$WORK/data/tree.new/small/f-"
  mv "$WORK/data/tree.new" "$WORK/data/tree"
fi
TREE_SIZE=$((SIZE + 4096 * 4096))

cleanup() {
  pkill -f "ddftpd --root $WORK/data" 2>/dev/null || true
  pkill -f "nginx -c $WORK/run" 2>/dev/null || true
  "$NB" down $BED 2>/dev/null || true
  rm -rf "$OUT"
}
trap cleanup EXIT
"$NB" down $BED 2>/dev/null || true
"$NB" up $BED --cluster 320mbit,320mbit --clients 400mbit,400mbit,400mbit,400mbit >/dev/null
if [ -n "${TCP_CC:-}" ]; then
  for h in m1 m2 c1 c2 c3 c4; do ip netns exec $BED-$h sysctl -qw net.ipv4.tcp_congestion_control="$TCP_CC"; done
fi

M1=10.79.0.11 M2=10.79.0.12
for i in 1 2; do
  ip=10.79.0.$((10 + i)); run=$WORK/run/m$i; mkdir -p "$run"; chmod 1777 "$run"
  "$NB" exec $BED-m$i -- "$DDFTPD" --root "$WORK/data" --listen $ip:7400 --metrics $ip:9400 >"$run/ddftpd.log" 2>&1 &
  # Its log says what it sent (the http case's copies).
  nginx_conf "$run" $ip:8080 "$WORK/data" 1 "access_log $run/access.log;"
  "$NB" exec $BED-m$i -- nginx -c "$run/nginx.conf"
done
sleep 1
# Warm the mirrors' page cache.
cat "$WORK/data/big.bin" >/dev/null

# The file's Metalink (SHA-256 pieces of PIECE bytes) naming both web servers.
PIECE_SET=${PIECE:-}
PIECE=${PIECE:-262144}
META4=$WORK/data/big-$PIECE.meta4
if [[ ,$CASES, == *,http,* ]] && [ ! -s "$META4" ]; then
  python3 - "$WORK/data/big.bin" "$META4" $M1 $M2 "$PIECE" <<'PY'
import hashlib, os, sys
src, out, m1, m2, length = sys.argv[1:6]
length = int(length)
hashes, whole = [], hashlib.sha256()
with open(src, "rb") as f:
    while piece := f.read(length):
        hashes.append(hashlib.sha256(piece).hexdigest())
        whole.update(piece)
size = os.path.getsize(src)
pieces = "".join(f"<hash>{h}</hash>" for h in hashes)
open(out, "w").write(
    '<?xml version="1.0" encoding="UTF-8"?>\n<metalink xmlns="urn:ietf:params:xml:ns:metalink">\n'
    f'<file name="big.bin"><size>{size}</size><hash type="sha-256">{whole.hexdigest()}</hash>\n'
    f'<pieces length="{length}" type="sha-256">{pieces}</pieces>\n'
    f'<url priority="1">http://{m1}:8080/big.bin</url><url priority="2">http://{m2}:8080/big.bin</url>\n'
    "</file></metalink>\n")
PY
fi

# The mirrors' bytes sent so far: the web servers' (their logs) for the
# http case, else the ddftpd's (their metrics, read from mirror 1's host).
sent() {
  if [ "${1:-}" = http ]; then
    cat "$WORK"/run/m1/access.log "$WORK"/run/m2/access.log 2>/dev/null | awk '{s += $10} END {printf "%.0f\n", s}'
    return
  fi
  local s=0 i v
  for i in 1 2; do
    v=$("$NB" exec $BED-m1 -- curl -s http://10.79.0.$((10 + i)):9400/metrics | awk '/^ddftpd_sent_bytes_total/ {print $2}')
    s=$((s + ${v%.*}))
  done
  echo $s
}

# run CASE N: prints "ALL_SECONDS COPIES PER-RECEIVER-SECONDS..."
run() {
  local case=$1 n=$2 j peers="" pids=() t0 t1 before after
  rm -rf "$OUT"/c* 2>/dev/null || true
  for j in $(seq 1 "$n"); do peers+="10.79.0.$((100 + j)):7500,"; done
  peers=${peers%,}
  before=$(sent "$case")
  t0=$(date +%s.%N)
  for j in $(seq 1 "$n"); do
    local o=$OUT/c$j
    case $case in
      share | slow) "$NB" exec $BED-c$j -- "$DDFTP" get big.bin -m $M1:7400,$M2:7400 -o "$o" -q --json ${LOGS:+${VERB:--v}} \
        --peers "$peers" --share-listen 10.79.0.$((100 + j)):7500 >"$o.json" 2>"$o.err" & ;;
      http) "$NB" exec $BED-c$j -- "$DDFTP" get --metalink "$META4" -o "$o" -q --json ${LOGS:+${VERB:--v}} \
        --peers "$peers" --share-listen 10.79.0.$((100 + j)):7500 >"$o.json" 2>"$o.err" & ;;
      tree) "$NB" exec $BED-c$j -- "$DDFTP" archive tree -m $M1:7400,$M2:7400 -d "$o" -q --json ${LOGS:+${VERB:--v}} \
        --peers "$peers" --share-listen 10.79.0.$((100 + j)):7500 >"$o.json" 2>"$o.err" & ;;
      separate) "$NB" exec $BED-c$j -- "$DDFTP" get big.bin -m $M1:7400,$M2:7400 -o "$o" -q --json >"$o.json" 2>"$o.err" & ;;
      aria2c) "$NB" exec $BED-c$j -- sh -c "aria2c -q -s16 -x4 -k1M --file-allocation=none --allow-overwrite=true \
        --dir $OUT -o c$j http://$M1:8080/big.bin http://$M2:8080/big.bin; date +%s.%N >$o.done" >"$o.err" 2>&1 & ;;
    esac
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { log "a receiver failed: $(cat "$OUT"/c*.err)"; }; done
  t1=$(date +%s.%N)
  after=$(sent "$case")
  if [ -n "${LOGS:-}" ]; then mkdir -p "$LOGS"; for j in $(seq 1 "$n"); do cp "$OUT/c$j.err" "$LOGS/$case-n$n-r${RUN_IX:-1}-c$j.err"; done; fi
  local size=$SIZE
  [ "$case" = tree ] && size=$TREE_SIZE
  python3 - "$case" "$n" "$t0" "$t1" "$before" "$after" "$OUT" "$size" <<'PY'
import json, os, sys
case, n, t0, t1, before, after, out, size = sys.argv[1], int(sys.argv[2]), *map(float, sys.argv[3:5]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7], int(sys.argv[8])
each = []
for j in range(1, n + 1):
    if case == "aria2c":
        each.append(float(open(f"{out}/c{j}.done").read()) - t0)
    else:
        d = json.load(open(f"{out}/c{j}.json"))
        assert d["bytes"] == size, d
        # An archive's report holds its transfer's.
        d = d.get("transfer", d)
        each.append(d["seconds"])
        for w in d.get("warnings", []):
            print(f"receiver {j}: {w}", file=sys.stderr)
        if os.environ.get("VERBOSE"):
            print(f"receiver {j}: " + ", ".join(f"{p['mirror']} {p['bytes'] >> 20} MiB" for p in d["producers"]), file=sys.stderr)
copies = (after - before) / size if case != "aria2c" else float("nan")
# Each receiver's bytes from peers, in percent (what `ddftp simulate
# --receivers` predicts).
if case != "aria2c":
    reports = [json.load(open(f"{out}/c{j}.json")) for j in range(1, n + 1)]
    peers = [r.get("transfer", r).get("from_peers", 0) * 100 / size for r in reports]
    open(f"{out}/peers.txt", "w").write(" ".join(f"{p:.1f}" for p in peers))
print(f"{max(each):.2f} {copies:.3f} " + " ".join(f"{s:.2f}" for s in each))
PY
  # Every copy exact (the first run of each case).
  if [ "${CHECK:-1}" = 1 ]; then
    for j in $(seq 1 "$n"); do
      case $case in
        tree) diff -r -q "$WORK/data/tree" "$OUT/c$j" >/dev/null || { log "tree $j differs (N=$n)"; exit 1; } ;;
        *) cmp -s "$WORK/data/big.bin" "$OUT/c$j" || { log "copy $j differs ($case, N=$n)"; exit 1; } ;;
      esac
    done
  fi
}

stamp=$(date -u +%Y-%m-%dT%H%MZ)
md=$TOP/benches/results/netbed-fan-out-$stamp.md
json=$TOP/benches/results/netbed-fan-out-$stamp.json
echo "[" >"$json"
first=1
{
  echo "# netbed fan-out: one 512 MiB file onto N nodes ($stamp)"
  echo
  echo "Command: \`${NS:+NS=\"$NS\" }${TCP_CC:+TCP_CC=$TCP_CC }${PIECE_SET:+PIECE=$PIECE }benches/netbed-fan-out.sh $RUNS $CASES\` (root). netbed --cluster 320mbit,320mbit --clients 4 x 400mbit."
  if [ "$BIN" = "$TOP/target/release" ]; then
    echo "Build: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!benches/results' || echo ' (with uncommitted changes)')."
  else
    echo "Build: the binaries in $BIN (BIN=)."
  fi
  echo "Bound: S/r = 536.9 MB / 47.8 MB/s = 11.2 s for every N (goodput 0.956 of the tbf rate)."
  echo "\"all\": seconds until the last receiver has its copy (median of $RUNS); copies: the mirrors' upload / S."
  echo
  echo "| case | N | all (s) median | runs | mirror copies | per receiver (last run) | from peers % (last run) | all / one-node share time |"
  echo "|---|---|---|---|---|---|---|---|"
} >"$md"
declare -A one
IFS=, read -r -a cases <<<"$CASES"
for c in "${cases[@]}"; do
  ns=${NS:-1 2 3 4}
  [ "$c" = slow ] && ns=4
  for n in $ns; do
    [ "$c" = slow ] && "$NB" rate $BED c4 1 100mbit
    results=()
    for r in $(seq 1 "$RUNS"); do
      line=$(RUN_IX=$r CHECK=$([ "$r" = 1 ] && echo 1 || echo 0) run "$c" "$n")
      log "$c N=$n run $r: $line"
      results+=("$line")
    done
    [ "$c" = slow ] && "$NB" rate $BED c4 1 400mbit
    # Medians (of an even count, the mean of the middle two).
    median() { sort -n | awk '{a[NR]=$1} END {m=int((NR+1)/2); if (NR%2) print a[m]; else printf "%.3f\n", (a[m]+a[m+1])/2}'; }
    med=$(printf '%s\n' "${results[@]}" | awk '{print $1}' | median)
    cop=$(printf '%s\n' "${results[@]}" | awk '{print $2}' | median)
    # Every run's copies too: a rare run that sends more hides in a median.
    cop="$cop ($(printf '%s\n' "${results[@]}" | awk '{print $2}' | paste -sd' '))"
    runs=$(printf '%s\n' "${results[@]}" | awk '{print $1}' | paste -sd' ')
    last=$(echo "${results[-1]}" | cut -d' ' -f3-)
    peers=$(cat "$OUT/peers.txt" 2>/dev/null || echo -)
    rm -f "$OUT/peers.txt"
    [ "$n" = 1 ] && one[$c]=$med
    # Against the one-node time of the same kind (a tree's, or the file's).
    base=${one[share]:-$med}
    case $c in tree | http) base=${one[$c]:-$med} ;; esac
    ratio=$(python3 -c "print(f'{$med / $base:.3f}')")
    echo "| $c | $n | $med | $runs | $cop | $last | $peers | $ratio |" >>"$md"
    # The slow case's measure: the last of the fast receivers (1..3), per run.
    [ "$c" = slow ] && fast=$(printf '%s\n' "${results[@]}" | awk '{m=$3; for (i=4;i<=5;i++) if ($i>m) m=$i; print m}' | paste -sd' ') \
      && slow_line="slow: the last fast receiver (1..3) per run: $fast s (bound 11.2 s)"
    [ $first = 1 ] || echo "," >>"$json"
    first=0
    printf '{"case":"%s","n":%s,"median_s":%s,"runs":"%s","mirror_copies":"%s","per_receiver_last":"%s","from_peers_pct_last":"%s"}' \
      "$c" "$n" "$med" "$runs" "$cop" "$last" "$peers" >>"$json"
  done
done
echo "]" >>"$json"
[ -n "${slow_line:-}" ] && printf '\n%s\n' "$slow_line" >>"$md"
log "wrote $md"
cat "$md"
