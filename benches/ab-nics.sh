#!/usr/bin/env bash
# A/B of DDNet bulk over two netbed NICs (the bulk and degraded cases of
# netbed-nics.sh): two builds' `netbench` take turns run after run, so a
# slow stretch of this shared VM hits them alike; prints every run and the
# median per build.
#
#   benches/ab-nics.sh DIR_A DIR_B [RUNS]
#
# Each DIR holds an `examples/netbench` (a target/release directory).
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,9p' "$0"; exit 2; }
A=$1; B=$2; RUNS=${3:-5}
TOP=$(cd "$(dirname "$0")/.." && pwd)
NB=$(cd "$TOP/../shared/testbed" && pwd)/netbed
BED=dabn
BYTES=$((512 * 1024 * 1024))
S=$BED-s; C=$BED-c
trap '"$NB" down $BED 2>/dev/null || true' EXIT

bulk() { # netbench [degrade]: prints seconds and MB/s
  "$NB" exec $S -- "$1" serve --listen 10.78.1.2:7600,10.78.2.2:7600 --sink 1 >/dev/null &
  local srv=$!
  sleep 0.5
  if [ -n "${2:-}" ]; then ( sleep 2; "$NB" rate $BED s 1 40mbit ) & fi
  "$NB" exec $C -- "$1" bulk --links 10.78.1.2:7600,10.78.2.2:7600 --bytes $BYTES |
    python3 -c "import json,sys; j=json.load(sys.stdin); print(j['seconds'], j['mb_per_s'])"
  wait $srv || true
  wait
}

for pair in "320mbit 160mbit" "320mbit 320mbit" "320mbit 160mbit degrade"; do
  set -- $pair
  "$NB" down $BED 2>/dev/null || true
  "$NB" up $BED --nics "$1,$2" >/dev/null
  declare -A got=()
  for _ in $(seq "$RUNS"); do
    for d in "$A" "$B"; do
      "$NB" rate $BED s 1 320mbit
      got[$d]+="$(bulk "$d/examples/netbench" "${3:-}" | tr ' ' ':') "
    done
  done
  for d in "$A" "$B"; do
    python3 -c "
import statistics, sys
runs = [tuple(map(float, r.split(':'))) for r in sys.argv[3:]]
s = statistics.median(r[0] for r in runs); m = statistics.median(r[1] for r in runs)
print(f'{sys.argv[1]:>24} {sys.argv[2]}: median {s:.3f} s, {m:.2f} MB/s; runs ' + ' '.join(f'{r[1]:.2f}' for r in runs))
" "$pair" "$d" ${got[$d]}
  done
  unset got
done
