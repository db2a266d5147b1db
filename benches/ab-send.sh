#!/usr/bin/env bash
# A/B (issue 58): `ddftp send < FILE` / `recv > FILE` over netbed NICs,
# two builds alternating run by run: OLD and NEW are directories holding
# ddftp (default NEW: this tree's release build). 256 MiB, byte-exact
# check, the sender's wall time and what each link carried.
#
# Usage (root): OLD=DIR [NEW=DIR] benches/ab-send.sh [RUNS] [RATES]
set -euo pipefail
RUNS=${1:-3}; RATES=${2:-320mbit,160mbit}
TOP=$(cd "$(dirname "$0")/.." && pwd)
NB=$(cd "$TOP/../shared/testbed" && pwd)/netbed
BED=dab
WORK=${WORK:-/tmp/ddftp-ab-send}
: "${OLD:?OLD=DIR: the directory of the other build}"
NEW=${NEW:-$TOP/target/release}
. "$TOP/benches/common.sh"
nics_bed $BED "$RATES"
for r in $(seq "$RUNS"); do for v in old new; do
  case $v in old) B=$OLD/ddftp;; new) B=$NEW/ddftp;; esac
  rm -f "$WORK/out"
  "$NB" exec $BED-s -- bash -c "$B recv --listen $links -q > $WORK/out" &
  sleep 0.5
  t0=$EPOCHREALTIME
  "$NB" exec $BED-c -- "$B" send --links "$links" < "$WORK/in" 2> "$WORK/send.err"
  t1=$EPOCHREALTIME
  wait
  exact=$(cmp -s "$WORK/in" "$WORK/out" && echo yes || echo NO)
  echo "$RATES run $r $v $(python3 -c "print(round($t1 - $t0, 2))") s exact=$exact $(grep -o '([^()]*)$' "$WORK/send.err" | tr -d '()' || true)"
done; done
