#!/usr/bin/env bash
# A/B of `ddftp archive` builds on the netbed mirrors of netbed-archive.sh:
# the builds take turns run after run (so a slow stretch of this shared VM
# hits them alike), fresh ddftpd processes and a warm page cache before
# every run, the external wall time of each; prints every run and the
# median per build. A change of a few percent needs N of 9-15 here.
#
#   benches/ab-archive.sh DIR_A DIR_B [DIR...]
#
# Each DIR holds a `ddftp` and a `ddftpd` (e.g. copies of target/release
# from two commits). Env: SRC (proj, proj/small or proj/large; default
# proj), K mirrors (default 4), N runs per build (default 9). The tree is
# the one netbed-archive.sh generates (run that once first).
set -euo pipefail

[ $# -ge 2 ] || { sed -n '2,13p' "$0"; exit 2; }
SRC=${SRC:-proj}; K=${K:-4}; N=${N:-9}
TOP=$(cd "$(dirname "$0")/.." && pwd)
NB=$(cd "$TOP/../shared/testbed" && pwd)/netbed
BED=dab
DATA=${WORK:-/tmp/ddftp-archive-bench}/data
OUT=/dev/shm/ddftp-ab-out
[ -e "$DATA/.complete" ] || { echo "no tree in $DATA: run benches/netbed-archive.sh once" >&2; exit 1; }
for d in "$@"; do [ -x "$d/ddftp" ] && [ -x "$d/ddftpd" ] || { echo "$d: no ddftp and ddftpd" >&2; exit 1; }; done

stop() { pkill -f "ddftpd --root $DATA" 2>/dev/null || true; while pgrep -f "ddftpd --root $DATA" >/dev/null; do sleep 0.05; done; }
cleanup() { stop; "$NB" down $BED 2>/dev/null || true; rm -rf "$OUT"; }
trap cleanup EXIT
"$NB" down $BED 2>/dev/null || true
"$NB" up $BED --mirrors 320mbit,160mbit,240mbit,80mbit >/dev/null
start() {
  for i in $(seq 1 4); do
    "$NB" exec $BED-m$i -- "$1/ddftpd" --root "$DATA" --listen 10.77.$i.2:7400 >/dev/null 2>&1 &
  done
  for i in $(seq 1 4); do
    until "$NB" exec $BED-c -- bash -c "exec 3<>/dev/tcp/10.77.$i.2/7400" 2>/dev/null; do sleep 0.05; done
  done
}
mirrors=$(for i in $(seq 1 "$K"); do echo -n "10.77.$i.2:7400,"; done); mirrors=${mirrors%,}

declare -A times
for _ in $(seq "$N"); do
  for d in "$@"; do
    stop; start "$d"
    find "$DATA/$SRC" -type f -exec cat {} + >/dev/null
    rm -rf "$OUT"; mkdir -p "$OUT"
    t0=$EPOCHREALTIME
    "$NB" exec $BED-c -- "$d/ddftp" archive "$SRC" --mirrors "$mirrors" --dest "$OUT" -q
    t1=$EPOCHREALTIME
    times[$d]+="$(python3 -c "print(f'{$t1 - $t0:.3f}')") "
  done
done
for d in "$@"; do
  python3 -c "
import statistics, sys
t = sorted(float(x) for x in sys.argv[2:])
print(f'{sys.argv[1]}: median {statistics.median(t):.3f} s  runs', ' '.join(f'{x:.3f}' for x in t))" "$d" ${times[$d]}
done
