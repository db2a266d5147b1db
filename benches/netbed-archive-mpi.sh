#!/usr/bin/env bash
# Benchmark: `mpirun -n N ddftp archive` with N = 1, 2, 3 ranks, one per
# netbed client host, from 4 mirrors, against the ideal: the tree's bytes
# over the smaller of the mirrors' and the N clients' TCP goodput sums
# (0.956 of the tbf rates: 4 x 320mbit = 153 MB/s; 400mbit = 47.8 MB/s a
# client, so 47.8, 95.6 and 143 MB/s). Then one client NIC at 200mbit and
# N = 3 (ideal 23.9 + 2 x 47.8 = 119.5 MB/s): ranks of different speeds
# must still finish together.
#
# Tree: 6 files of 320 MiB and 50,000 small ones (0-2047 bytes in 21,620
# directories, benches/make-tree.py): 2.06 GB. Fresh ddftpd processes and
# a warm page cache on the mirrors before every run; the ranks write into
# one DEST on tmpfs (OUT, default /dev/shm/ddftp-archive-mpi-out), the
# netbed hosts' shared file system. The time is mpirun's whole run (MPI
# start, the list, the plan, the move, the finish); the first run of each
# case is checked against the source (type, size, mode, mtime, path).
#
# Usage (root): benches/netbed-archive-mpi.sh [RUNS] [CASES]  (CASES: 1,2,3,uneven)
# Writes benches/results/netbed-archive-mpi-<UTC date>.{md,json}.
set -euo pipefail

RUNS=${1:-3}
CASES=${2:-1,2,3,uneven}
TOP=$(cd "$(dirname "$0")/.." && pwd)
. "$TOP/benches/common.sh"
NB=$(cd "$TOP/../shared/testbed" && pwd)/netbed
BED=dm
WORK=${WORK:-/tmp/ddftp-archive-mpi}
OUT=${OUT:-/dev/shm/ddftp-archive-mpi-out}
log() { echo "[$(date +%T)] $*" >&2; }

cd "$TOP"
cargo build --release -q --bins
cargo build --release -q -p ddftp-cli --features mpi --target-dir target/mpi
DDFTP=$TOP/target/mpi/release/ddftp
DDFTPD=$TOP/target/release/ddftpd

DATA=$WORK/data
if [ ! -e "$DATA/.complete" ]; then
  log "generating the tree"
  rm -rf "$DATA"; mkdir -p "$DATA/tree/small" "$DATA/tree/large"
  python3 benches/make-tree.py "$DATA/tree/small" 50000
  for i in 1 2 3 4 5 6; do head -c $((320 << 20)) /dev/urandom > "$DATA/tree/large/l$i.bin"; done
  touch "$DATA/.complete"
fi
chmod 755 "$WORK" "$DATA"
mkdir -p "$WORK/run"

cleanup() { pkill -f "ddftpd --root $DATA" 2>/dev/null || true; "$NB" down $BED 2>/dev/null || true; rm -rf "$OUT"; }
trap cleanup EXIT
"$NB" down $BED 2>/dev/null || true
"$NB" up $BED --cluster 320mbit,320mbit,320mbit,320mbit --clients 400mbit,400mbit,400mbit >/dev/null

mirrors_up() {
  pkill -f "ddftpd --root $DATA" 2>/dev/null || true
  while pgrep -f "ddftpd --root $DATA" >/dev/null; do sleep 0.05; done
  for i in 1 2 3 4; do
    "$NB" exec $BED-m$i -- "$DDFTPD" --root "$DATA" --listen 10.79.0.$((10 + i)):7400 >>"$WORK/run/ddftpd-$i.log" 2>&1 &
  done
  for i in 1 2 3 4; do
    until "$NB" exec $BED-c1 -- bash -c "exec 3<>/dev/tcp/10.79.0.$((10 + i))/7400" 2>/dev/null; do sleep 0.05; done
  done
}
warm() { find "$DATA/tree" -type f -exec cat {} + >/dev/null; }
now() { date +%s.%N; }
BYTES=$(find "$DATA/tree" -type f -printf '%s\n' | awk '{s+=$1} END {print s}')
FILES=$(find "$DATA/tree" -type f | wc -l)
MIRRORS=10.79.0.11:7400,10.79.0.12:7400,10.79.0.13:7400,10.79.0.14:7400
# OpenMPI 4.1's daemon crashes now and then on netbed's hosts (about one
# start in eight: a segfault in hwloc_shmem_topology_write, from its
# "rtc hwloc" component); without that component none did in 40 starts.
export OMPI_MCA_rtc='^hwloc'

results=()
run() { # label N clients-goodput-MB/s...
  local label=$1 n=$2 times=() per=()
  shift 2
  local ideal_rate
  ideal_rate=$(python3 -c "import sys; print(min(4 * 320e6 / 8 * 0.956, sum(float(x) for x in sys.argv[1:]) * 1e6))" "$@")
  for r in $(seq 1 "$RUNS"); do
    rm -rf "$OUT"
    mirrors_up
    warm
    local t0; t0=$(now)
    "$NB" mpirun $BED "$n" -- "$DDFTP" archive tree --mirrors "$MIRRORS" --dest "$OUT" -q --json >"$WORK/run/last.json"
    local t1; t1=$(now)
    times+=("$(python3 -c "print(f'{$t1 - $t0:.3f}')")")
    per+=("$(python3 -c "
import json
r = json.load(open('$WORK/run/last.json'))
print(' '.join(f\"r{k['rank']}:{k['bytes'] / 1e6:.0f}MB/{k['seconds']:.1f}s\" for k in r['ranks']))")")
    if [ "$r" = 1 ]; then
      a=$(cd "$DATA/tree" && listing)
      b=$(cd "$OUT" && listing)
      [ "$a" = "$b" ] || { log "$label: the copy differs from the source"; exit 1; }
    fi
  done
  results+=("$(python3 -c "
import json, statistics, sys
t = [float(x) for x in sys.argv[1:]]
m = statistics.median(t)
ideal = $BYTES / $ideal_rate
print(json.dumps({'case': '$label', 'ranks': $n, 'runs': t, 'median': m, 'bytes': $BYTES, 'files': $FILES,
                  'mb_per_s': $BYTES / m / 1e6, 'ideal_mb_per_s': $ideal_rate / 1e6, 'ideal': ideal,
                  'efficiency': ideal / m, 'per_rank_last': '${per[-1]}'}))
" "${times[@]}")")
  log "$label: ${times[*]} (last: ${per[-1]})"
}

G=47.8 # 400mbit goodput, MB/s
for c in ${CASES//,/ }; do
  case $c in
    1) run "N=1" 1 $G ;;
    2) run "N=2" 2 $G $G ;;
    3) run "N=3" 3 $G $G $G ;;
    uneven)
      "$NB" rate $BED c1 1 200mbit >/dev/null
      run "N=3, client 1 at 200mbit" 3 23.9 $G $G
      "$NB" rate $BED c1 1 400mbit >/dev/null ;;
    *) echo "unknown case $c" >&2; exit 2 ;;
  esac
done

STAMP=$(date -u +%Y-%m-%dT%H%MZ)
mkdir -p benches/results
printf '%s\n' "${results[@]}" | python3 -c "import json,sys; print(json.dumps([json.loads(l) for l in sys.stdin], indent=1))" \
  >"benches/results/netbed-archive-mpi-$STAMP.json"
{
  echo "# netbed archive across MPI ranks, $STAMP"
  echo
  echo "\`bash benches/netbed-archive-mpi.sh $RUNS\` on $(nproc) cores (every netbed host, ranks and mirrors, shares them);"
  echo "netbed --cluster 320mbit x 4 --clients 400mbit x 3, rank r on client r+1; $FILES files, $((BYTES / 1000000)) MB (6 x 320 MiB + 50,000 small);"
  echo "ideal = bytes / min(mirrors' goodput 153 MB/s, the ranks' clients' goodput); time = the whole mpirun. Medians of $RUNS."
  echo
  echo "| case | ranks | median s | runs | MB/s | ideal MB/s | ideal s | efficiency | last run per rank |"
  echo "|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${results[@]}" | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    runs = ' '.join(f'{x:.2f}' for x in r['runs'])
    print(f\"| {r['case']} | {r['ranks']} | {r['median']:.2f} | {runs} | {r['mb_per_s']:.1f} | {r['ideal_mb_per_s']:.1f} | {r['ideal']:.2f} | {r['efficiency']:.3f} | {r['per_rank_last']} |\")"
} | tee "benches/results/netbed-archive-mpi-$STAMP.md"
