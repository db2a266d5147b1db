#!/usr/bin/env bash
# The fan-out model at sizes no test machine holds: `ddftp simulate
# --receivers N` for the netbed fan-out case (2 mirrors at 320 mbit, nodes
# at 400 mbit: goodput in 256 KiB blocks a second), 1 GiB (4096 blocks).
# Prints the last receiver's time against the bound max(S/r, S/U,
# N*S/(U + N*r)) and against the bound plus log2(N+1) blocks, the mirrors'
# upload in copies, and each receiver's share from peers (what
# benches/netbed-fan-out.sh measures for N = 2..4, there with 512 MiB).
#
# With many receivers every connection is thin (N = 1,000: a receiver's
# mirror connection carries 0.15 blocks a second, a peer's 0.09), so a
# first block takes longer than get's default 5 s stall timeout: STALL
# (default 60) is passed for N >= 300, and the report says so.
#
# Usage: benches/simulate-receivers.sh [NS]   (default "2 3 4 10 100 1000";
# N = 1,000 takes about a quarter of an hour and 2 GiB)
# Writes benches/results/simulate-receivers-<UTC date>.md.
set -euo pipefail

NS=${1:-2 3 4 10 100 1000}
STALL=${STALL:-60}
TOP=$(cd "$(dirname "$0")/.." && pwd)
cd "$TOP"
cargo build --release -q --bin ddftp
DDFTP=$TOP/target/release/ddftp
stamp=$(date -u +%Y-%m-%dT%H%MZ)
md=$TOP/benches/results/simulate-receivers-$stamp.md
{
  echo "# ddftp simulate --receivers ($stamp)"
  echo
  echo "Command: \`benches/simulate-receivers.sh \"$NS\"\`; each line is"
  echo "\`ddftp simulate --blocks 4096 --speeds 145.9,145.9 --receivers N --receiver-speeds 182.4 --json\`"
  echo "(plus \`--stall-timeout $STALL\` where marked). Times in seconds."
  echo
  echo "| N | stall timeout | last | bound | last / bound | last / (bound + log2(N+1) blocks) | mirror copies | from peers % (min-max) | drops | wall |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
} >"$md"
for n in $NS; do
  stall=5
  [ "$n" -ge 300 ] && stall=$STALL
  t0=$(date +%s.%N)
  "$DDFTP" simulate --blocks 4096 --speeds 145.9,145.9 --receivers "$n" --receiver-speeds 182.4 \
    --stall-timeout "$stall" --json >/tmp/simulate-receivers.json || true
  t1=$(date +%s.%N)
  python3 - "$n" "$stall" "$t0" "$t1" >>"$md" <<'PY'
import json, sys
n, stall, t0, t1 = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
r = json.load(open("/tmp/simulate-receivers.json"))
peers = [x["from_peers"] * 100 / r["blocks"] for x in r["receivers"]]
print(f"| {n} | {stall} s | {r['last']:.2f} | {r['bound']:.2f} | {r['last'] / r['bound']:.3f} | "
      f"{r['last'] / r['bound_plus_pipeline']:.3f} | {r['mirror_copies']:.3f} | {min(peers):.1f}-{max(peers):.1f} | "
      f"{len(r['dropped'])} | {t1 - t0:.0f} s |")
PY
  tail -1 "$md" >&2
done
echo "wrote $md" >&2
