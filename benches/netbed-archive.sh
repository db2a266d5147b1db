#!/usr/bin/env bash
# Benchmark: `ddftp archive` from 2 and from 4 netbed mirrors against rsync
# from one mirror (rsync daemon) and against the ideal (bytes / the sum of
# the links' TCP goodputs, 0.956 of their tbf rates).
#
# Tree: proj/small, 100,000 files of 0-2047 bytes in 21,621 directories
# (benches/make-tree.py), and proj/large, 4 files of 32 MiB. Three cases:
# the whole tree, proj/small alone (files/s against rsync's) and
# proj/large alone (bytes efficiency when files are few). Warm page cache on the mirrors, fresh ddftpd processes before every
# ddftp run (a first archive: nothing kept from the run before); every tool writes its copy to
# tmpfs (OUT, default /dev/shm/ddftp-archive-out): this VM's disk takes
# tens of seconds to create and delete 100,000 files and its writeback
# made successive runs of any tool, rsync included, 3-7x slower.
#
# The case `resync` (not in the default list): a tree of 200,000 small
# files copied first (untimed, by the tool itself), then 1% of its files
# rewritten on the mirrors (new bytes, new mtime) and the tool run again
# into that copy, timed: `ddftp archive --delete` from 2 mirrors against
# `rsync -a --delete` from the rsync daemon on mirror 1, and, where built
# (DSYNC, default /tmp/mfu/bin/dsync: hpc/mpifileutils with libcircle,
# lwgrp, dtcmp), mpifileutils' `dsync --delete` with 2 MPI ranks reading
# the mirror's tree straight from the file system, as on a shared
# parallel file system: no network at all. Each run changes other files.
#
# OLD (env, resync only): a directory holding another build's ddftp and
#   ddftpd: the tool `ddftp-old` runs the resync with them (servers too),
#   taking turns with `ddftp-k2` run after run, for an A/B in one sitting.
#
# Usage (root): benches/netbed-archive.sh [RUNS] [CASES]   (CASES: whole,small,large,resync)
# Writes benches/results/netbed-archive-<UTC date>.{md,json}.
set -euo pipefail

RUNS=${1:-3}
CASES=${2:-whole,small,large}
TOP=$(cd "$(dirname "$0")/.." && pwd)
. "$TOP/benches/common.sh"
NB=$(cd "$TOP/../shared/testbed" && pwd)/netbed
BED=dda
WORK=${WORK:-/tmp/ddftp-archive-bench}
RATES=(320mbit 160mbit 240mbit 80mbit)
log() { echo "[$(date +%T)] $*" >&2; }

need() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}
need rsync iproute2 python3

cd "$TOP"
cargo build --release -q --bins
DDFTP=$TOP/target/release/ddftp
DDFTPD=$TOP/target/release/ddftpd

cleanup() { pkill -f "ddftpd --root $DATA" 2>/dev/null || true; "$NB" down $BED 2>/dev/null || true; }
trap cleanup EXIT
"$NB" down $BED 2>/dev/null || true
"$NB" up $BED --mirrors "$(IFS=,; echo "${RATES[*]}")" >/dev/null

DATA=$WORK/data
if [ ! -e "$DATA/.complete" ]; then
  log "generating the tree"
  rm -rf "$DATA"; mkdir -p "$DATA/proj/small" "$DATA/proj/large"
  python3 benches/make-tree.py "$DATA/proj/small" 100000
  for i in 1 2 3 4; do head -c $((32 << 20)) /dev/urandom > "$DATA/proj/large/l$i.bin"; done
  touch "$DATA/.complete"
fi
if [[ ,$CASES, = *,resync,* ]] && [ ! -e "$DATA/.resync-complete" ]; then
  log "generating the resync tree (200,000 files)"
  rm -rf "$DATA/resync"; mkdir -p "$DATA/resync"
  python3 benches/make-tree.py "$DATA/resync" 200000
  touch "$DATA/.resync-complete"
fi
chmod 755 "$WORK" "$DATA"
OUT=${OUT:-/dev/shm/ddftp-archive-out}
mkdir -p "$WORK/run"
# Fresh servers before every ddftp run: each run is a first archive of the
# tree, with nothing a server kept from the run before (registered bundles).
mirrors_up() { # [ddftpd binary]
  local server=${1:-$DDFTPD}
  pkill -f "ddftpd --root $DATA" 2>/dev/null || true
  while pgrep -f "ddftpd --root $DATA" >/dev/null; do sleep 0.05; done
  for i in 1 2 3 4; do
    ip=10.77.$i.2
    "$NB" exec $BED-m$i -- "$server" --root "$DATA" --listen $ip:7400 >>"$WORK/run/ddftpd-$i.log" 2>&1 3>&- &
  done
  for i in 1 2 3 4; do
    until "$NB" exec $BED-c -- bash -c "exec 3<>/dev/tcp/10.77.$i.2/7400" 2>/dev/null; do sleep 0.05; done
  done
}
mirrors_up
cat >"$WORK/run/rsyncd.conf" <<CONF
pid file = $WORK/run/rsyncd.pid
use chroot = no
[data]
path = $DATA
read only = yes
uid = root
gid = root
CONF
"$NB" exec $BED-m1 -- rsync --daemon --address=10.77.1.2 --config="$WORK/run/rsyncd.conf"
sleep 1
# Warm page cache, for every tool before every run: this VM's page cache
# is trimmed from outside (kdamond), and a cold file makes a mirror read
# the disk mid-run.
warm() { find "$DATA/$1" -type f -exec cat {} + >/dev/null; }
warm .

in_client() { "$NB" exec $BED-c -- "$@"; }
now() { date +%s.%N; }
bytes_of() { find "$DATA/$1" -type f -printf '%s\n' | awk '{s+=$1} END {print s}'; }
files_of() { find "$DATA/$1" -type f | wc -l; }
goodput() { # mirrors count -> bytes/s of the first N links
  python3 -c "
r = {'320mbit': 320e6, '160mbit': 160e6, '240mbit': 240e6, '80mbit': 80e6}
print(sum(r[x] for x in '${RATES[*]}'.split()[:$1]) / 8 * 0.956)"
}
mirrors() { local m=(); for i in $(seq 1 "$1"); do m+=("10.77.$i.2:7400"); done; (IFS=,; echo "${m[*]}"); }

# listing (common.sh); and without directories' times, for dsync.
listing_no_dir_times() {
  find . \( -type d -printf 'd - %m %p\n' \) -o \( ! -type d -printf '%y %s %m %T@ %p %l\n' \) | sort | md5sum
}

results=()
run() { # case src tool -> appends a result
  local c=$1 src=$2 tool=$3 times=() out=$OUT
  for r in $(seq 1 "$RUNS"); do
    rm -rf "$out"; mkdir -p "$out"
    case $tool in ddftp-*) mirrors_up ;; esac
    warm "$src"
    local t0; t0=$(now)
    case $tool in
      ddftp-k2) in_client "$DDFTP" archive "$src" --mirrors "$(mirrors 2)" --dest "$out" -q ;;
      ddftp-k4) in_client "$DDFTP" archive "$src" --mirrors "$(mirrors 4)" --dest "$out" -q ;;
      rsync) in_client rsync -a "rsync://10.77.1.2/data/$src/" "$out/" ;;
    esac
    local t1; t1=$(now)
    times+=("$(python3 -c "print(f'{$t1 - $t0:.3f}')")")
    if [ "$r" = 1 ]; then
      a=$(cd "$DATA/$src" && listing)
      b=$(cd "$out" && listing)
      [ "$a" = "$b" ] || { log "$tool $src: the copy differs from the source"; exit 1; }
    fi
  done
  local bytes files k
  bytes=$(bytes_of "$src"); files=$(files_of "$src")
  k=1; [ $tool = ddftp-k2 ] && k=2; [ $tool = ddftp-k4 ] && k=4
  results+=("$(python3 -c "
import json, statistics, sys
t = [float(x) for x in sys.argv[1:]]
m = statistics.median(t)
ideal = $bytes / $(goodput $k)
print(json.dumps({'case': '$c', 'tool': '$tool', 'mirrors': $k, 'runs': t, 'median': m, 'bytes': $bytes, 'files': $files,
                  'files_per_s': $files / m, 'mb_per_s': $bytes / m / 1e6, 'ideal': ideal, 'efficiency': ideal / m}))
" "${times[@]}")")
  log "$c $tool: ${times[*]}"
}

# 1% of the resync tree's files rewritten: new bytes of the same length
# and a new mtime (seeded by the run, so each run changes other files).
mutate() {
  python3 - "$DATA/resync" "$1" <<'PY'
import os, random, sys, time
root, seed = sys.argv[1], int(sys.argv[2])
files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)
rng = random.Random(seed)
now = time.time()
for p in rng.sample(files, len(files) // 100):
    n = os.path.getsize(p)
    with open(p, "wb") as f:
        f.write(os.urandom(n))
    os.utime(p, (now, now + rng.random()))
PY
}
DSYNC=${DSYNC:-/tmp/mfu/bin/dsync}
dsync_run() { # src dest [flags]
  LD_LIBRARY_PATH=$(dirname "$DSYNC")/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
    mpirun --allow-run-as-root --oversubscribe -np 2 "$DSYNC" -q "${@:3}" "$1" "$2" >/dev/null
}
resync_once() { # tool run -> one time on stdout (run in a subshell)
  exec 3>&1 1>&2
  local tool=$1 r=$2 out=$OUT client=$DDFTP server=$DDFTPD
  [ "$tool" = ddftp-old ] && client=$OLD/ddftp server=$OLD/ddftpd
  rm -rf "$out"; mkdir -p "$out"
  case $tool in ddftp-*) mirrors_up "$server" ;; esac
  warm resync
  # The first copy, untimed, by the tool itself.
  case $tool in
    ddftp-k2 | ddftp-old) in_client "$client" archive resync --mirrors "$(mirrors 2)" --dest "$out" -q ;;
    rsync) in_client rsync -a "rsync://10.77.1.2/data/resync/" "$out/" ;;
    dsync) dsync_run "$DATA/resync" "$out" ;;
  esac
  mutate "$r$RANDOM"
  case $tool in ddftp-*) mirrors_up "$server" ;; esac
  warm resync
  local t0; t0=$(now)
  case $tool in
    ddftp-k2 | ddftp-old) in_client "$client" archive resync --mirrors "$(mirrors 2)" --dest "$out" --delete -q ;;
    rsync) in_client rsync -a --delete "rsync://10.77.1.2/data/resync/" "$out/" ;;
    dsync) dsync_run "$DATA/resync" "$out" --delete ;;
  esac
  local t1; t1=$(now)
  # dsync leaves a directory whose files it replaced with the time of
  # the sync as its mtime: for it, directories' mtimes are not compared.
  local how=listing; [ "$tool" = dsync ] && how=listing_no_dir_times
  a=$(cd "$DATA/resync" && $how)
  b=$(cd "$out" && $how)
  [ "$a" = "$b" ] || { log "$tool resync: the copy differs from the source"; exit 1; }
  python3 -c "print(f'{$t1 - $t0:.3f}')" >&3
}
declare -A resync_times
resync_result() { # tool -> appends a result
  local tool=$1
  read -r -a times <<<"${resync_times[$tool]}"
  local files; files=$(files_of resync)
  results+=("$(python3 -c "
import json, statistics, sys
t = [float(x) for x in sys.argv[1:]]
m = statistics.median(t)
print(json.dumps({'case': 'resync 1%', 'tool': '$tool', 'mirrors': 2 if '$tool'.startswith('ddftp') else 1, 'runs': t,
                  'median': m, 'bytes': 0, 'files': $files, 'files_per_s': $files / m, 'mb_per_s': 0, 'ideal': 0, 'efficiency': 0}))
" "${times[@]}")")
  log "resync $tool: ${times[*]}"
}

rm -rf "$OUT"
IFS=, read -r -a cases <<<"$CASES"
for c in "${cases[@]}"; do
  case $c in
    whole) for tool in ddftp-k2 ddftp-k4 rsync; do run whole proj $tool; done ;;
    small) for tool in ddftp-k2 ddftp-k4 rsync; do run small proj/small $tool; done ;;
    large) for tool in ddftp-k2 ddftp-k4 rsync; do run large proj/large $tool; done ;;
    resync)
      tools=(ddftp-k2 rsync)
      if [ -x "$DSYNC" ]; then tools+=(dsync); else log "dsync not built ($DSYNC): not measured"; fi
      [ -n "${OLD:-}" ] && tools+=(ddftp-old)
      # The tools take turns, run after run.
      for r in $(seq 1 "$RUNS"); do
        for tool in "${tools[@]}"; do
          t=$(resync_once "$tool" "$r") && [ -n "$t" ] || { log "$tool resync run $r failed"; exit 1; }
          resync_times[$tool]+="$t "
        done
      done
      for tool in "${tools[@]}"; do resync_result "$tool"; done ;;
    *) echo "unknown case $c" >&2; exit 2 ;;
  esac
done

STAMP=$(date -u +%Y-%m-%dT%H%MZ)
mkdir -p benches/results
printf '%s\n' "${results[@]}" | python3 -c "import json,sys; print(json.dumps([json.loads(l) for l in sys.stdin], indent=1))" \
  > "benches/results/netbed-archive-$STAMP.json"
{
  echo "# netbed archive, $STAMP"
  echo
  echo "\`bash benches/netbed-archive.sh $RUNS\` on $(nproc) cores; links ${RATES[*]} (k = 2 uses the first two);"
  echo "ideal = bytes / (0.956 x the sum of the k links' rates); rsync from mirror 1 (320mbit) alone; copies written to tmpfs;"
  echo "ddftpd restarted before every ddftp run (each a first archive: no bundle kept from a run before); page cache warmed before every run. Medians of $RUNS."
  echo
  echo "| case | tool | files | MB | median s | files/s | MB/s | ideal s | efficiency |"
  echo "|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${results[@]}" | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    print(f\"| {r['case']} | {r['tool']} | {r['files']} | {r['bytes']/1e6:.1f} | {r['median']:.2f} | {r['files_per_s']:.0f} | {r['mb_per_s']:.1f} | {r['ideal']:.2f} | {r['efficiency']:.3f} |\")"
} | tee "benches/results/netbed-archive-$STAMP.md"
rm -rf "$OUT"
