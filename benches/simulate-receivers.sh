#!/usr/bin/env bash
# The fan-out model at sizes no test machine holds: `ddftp simulate
# --receivers N` for the netbed fan-out case (2 mirrors at 320 mbit, nodes
# at 400 mbit: goodput in 256 KiB blocks a second), 1 GiB (4096 blocks).
# Prints the last receiver's time against the bound max(S/r, S/U,
# N*S/(U + N*r)) and against the bound plus log2(N+1) blocks, the mirrors'
# upload in copies, and each receiver's share from peers (what
# benches/netbed-fan-out.sh measures for N = 2..4, there with 512 MiB).
#
# Beyond 64 receivers each share goes down a tree (ddops::fan). STALL
# (default get's 5 s) is the stall timeout for every N.
#
# Usage: benches/simulate-receivers.sh [NS]   (default "2 3 4 10 100 1000";
# N = 1,000 takes under a minute)
# Writes benches/results/simulate-receivers-<UTC date>.md.
set -euo pipefail

NS=${1:-2 3 4 10 100 1000}
STALL=${STALL:-5}
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
  echo "with \`--stall-timeout $STALL\`. Times in seconds."
  echo
  echo "| N | stall timeout | last | bound | last / bound | last / (bound + log2(N+1) blocks) | mirror copies | from peers % (min-max) | drops | wall |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
} >"$md"
for n in $NS; do
  stall=$STALL
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
