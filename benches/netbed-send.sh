#!/usr/bin/env bash
# `ddftp send < FILE` / `ddftp recv > FILE` over two netbed NICs: a
# regular file as input (read in 4 MiB pieces), 256 MiB, byte-exact check,
# wall time from the sender's start to its exit, against the links' TCP
# goodput (tbf rate * 1448/1514).
#
# With TLS=1 (env), every link over TLS (a CA and certificate made for the
# run), the same runs alternating plaintext and TLS.
#
# Usage (root): [TLS=1] benches/netbed-send.sh [RUNS] [RATES]   (default 3, 320mbit,160mbit)
# Writes benches/results/netbed-send-<UTC date>-<rates>.md.
set -euo pipefail
RUNS=${1:-3}
RATES=${2:-320mbit,160mbit}
TOP=$(cd "$(dirname "$0")/.." && pwd)
NB=$(cd "$TOP/../shared/testbed" && pwd)/netbed
BED=dsn
WORK=${WORK:-/tmp/ddftp-send-bench}
. "$TOP/benches/common.sh"
nics_bed $BED "$RATES"
goodput=$(python3 -c "
import sys
mb = {'mbit': 1e6, 'gbit': 1e9}
tot = 0
for r in sys.argv[1].split(','):
    for u, f in mb.items():
        if r.endswith(u): tot += float(r[:-len(u)]) * f
print(tot / 8 * 1448 / 1514 / 1e6)" "$RATES")
stamp=$(date -u +%Y-%m-%dT%H%MZ)
out=benches/results/netbed-send-$stamp-${RATES//,/+}.md
{
  echo "# netbed-send $stamp"
  echo
  echo "command: \`${TLS:+TLS=1 }bash benches/netbed-send.sh $RUNS $RATES\`; links' goodput $goodput MB/s"
  echo
  echo "| run | mode | seconds | MB/s | of goodput | split | exact |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
} > "$out"
modes=plain
if [ -n "${TLS:-}" ]; then
  # shellcheck disable=SC2046
  test_pki "$WORK/pki" $(n=0; IFS=,; for _ in $RATES; do n=$((n + 1)); echo "10.78.$n.2"; done)
  modes="plain tls"
fi
for r in $(seq "$RUNS"); do for mode in $modes; do
  rm -f "$WORK/out"
  rflags="" sflags=""
  if [ "$mode" = tls ]; then
    rflags="--tls-cert $WORK/pki/srv.pem --tls-key $WORK/pki/srv.key"
    sflags="--tls --ca-file $WORK/pki/ca.pem"
  fi
  "$NB" exec $BED-s -- bash -c "$BIN recv --listen $links -q $rflags > $WORK/out" &
  sleep 0.5
  t0=$EPOCHREALTIME
  # shellcheck disable=SC2086
  "$NB" exec $BED-c -- "$BIN" send --links "$links" $sflags < "$WORK/in" 2> "$WORK/send.err"
  t1=$EPOCHREALTIME
  wait
  exact=$(cmp -s "$WORK/in" "$WORK/out" && echo yes || echo NO)
  split=$(grep -o '([^()]*)$' "$WORK/send.err" | tr -d '()' || true)
  python3 -c "
s = $t1 - $t0; mb = (256 << 20) / 1e6
print(f'| $r | $mode | {s:.2f} | {mb / s:.1f} | {mb / s / $goodput:.3f} | $split | $exact |')" >> "$out"
done; done
cat "$out"
