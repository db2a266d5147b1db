#!/usr/bin/env bash
# `ddftp send < FILE` / `ddftp recv > FILE` over two netbed NICs while
# NIC 2 goes down (its link set down on the sending host: a pulled cable,
# no reset) at AT s for FOR s, then up. 256 MiB, byte-exact check; wall
# time of the sender against the time without the outage in the same run,
# and what each link carried. A silent link is lost after ddnet's
# SILENT_LINK (5 s without acknowledgement), its part sent again on the
# other; `send` connects it again once it is up.
#
# Usage (root): benches/netbed-send-outage.sh [AT] [FOR] [RATES]   (default 1.5 12 320mbit,160mbit)
# Writes benches/results/netbed-send-outage-<UTC date>.md.
set -euo pipefail
AT=${1:-1.5}
FOR=${2:-12}
RATES=${3:-320mbit,160mbit}
TOP=$(cd "$(dirname "$0")/.." && pwd)
NB=$(cd "$TOP/../shared/testbed" && pwd)/netbed
BED=dso
WORK=${WORK:-/tmp/ddftp-send-bench}
. "$TOP/benches/common.sh"
nics_bed $BED "$RATES"
stamp=$(date -u +%Y-%m-%dT%H%MZ)
out=benches/results/netbed-send-outage-$stamp.md

run() { # outage? -> "seconds|exact|summary"
  rm -f "$WORK/out"
  "$NB" exec $BED-s -- bash -c "$BIN recv --listen $links -q > $WORK/out" &
  local rpid=$! opid=""
  sleep 0.3
  if [ "$1" = yes ]; then
    ( sleep "$AT"; ip -n $BED-c link set nic2 down; sleep "$FOR"; ip -n $BED-c link set nic2 up ) & opid=$!
  fi
  local t0 t1
  t0=$(date +%s.%N)
  "$NB" exec $BED-c -- "$BIN" send --links "$links" < "$WORK/in" 2>"$WORK/send.err" || true
  t1=$(date +%s.%N)
  wait "$rpid" || true
  [ -z "$opid" ] || wait "$opid"
  local exact=no
  cmp -s "$WORK/in" "$WORK/out" && exact=yes
  echo "$(python3 -c "print(f'{$t1 - $t0:.2f}')")|$exact|$(tail -1 "$WORK/send.err" | sed 's/^ddftp: //')"
}
ref=$(run no)
got=$(run yes)
{
  echo "# netbed-send-outage $stamp"
  echo
  echo "command: \`bash benches/netbed-send-outage.sh $AT $FOR $RATES\`: 256 MiB over two NICs ($RATES);"
  echo "NIC 2 down at $AT s for $FOR s (link set down on the sending host)."
  echo
  echo "| case | seconds | exact | sender's summary |"
  echo "| --- | --- | --- | --- |"
  echo "| no outage | ${ref//|/ | } |"
  echo "| NIC 2 down | ${got//|/ | } |"
  echo
  echo "Sender's warnings with the outage:"
  echo
  echo '```'
  grep warning "$WORK/send.err" || true
  echo '```'
} > "$out"
cat "$out"
