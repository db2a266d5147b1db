#!/usr/bin/env bash
# DDPar: `ddops/examples/matmul.rs` RUNS times per case, medians of the
# makespan against the ideal and a static equal split.
# Usage: benches/ddpar-matmul.sh [RUNS]
# Writes benches/results/ddpar-matmul-<UTC date>.{md,json}.
set -euo pipefail
RUNS=${1:-5}
TOP=$(cd "$(dirname "$0")/.." && pwd)
cd "$TOP"
cargo build --release -q -p ddops --example matmul
BIN=$TOP/target/release/examples/matmul
stamp=$(date -u +%Y-%m-%dT%H%MZ)
out=$TOP/benches/results/ddpar-matmul-$stamp
cases=(
  "--speeds 400,300,200,100"
  "--speeds 400,300,200,100 --slow-factor 0.05"
  "--speeds 200,200,200,200,100,100,50,50 --rows 4096"
  "--speeds 300,100 --slow-worker 2 --slow-factor 0.5"
)
: > "$out.json"
for c in "${cases[@]}"; do
  for _ in $(seq "$RUNS"); do
    # shellcheck disable=SC2086
    echo "{\"args\": \"$c\", \"result\": $("$BIN" $c --json)}" >> "$out.json"
  done
done
python3 - "$out.json" "$RUNS" > "$out.md" <<'PY'
import json, sys, statistics as st
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"# DDPar matmul, {sys.argv[1].split('matmul-')[1][:-5]}\n")
print(f"`benches/ddpar-matmul.sh {sys.argv[2]}` (medians of {sys.argv[2]} runs; worker 1 slows to the factor at half the ideal unless said)\n")
print("| args | makespan s | ideal s | static s | of ideal (min-max) | static of ideal | exact |")
print("|---|---|---|---|---|---|---|")
for a in dict.fromkeys(r["args"] for r in rows):
    rs = [r["result"] for r in rows if r["args"] == a]
    m = st.median(r["makespan_s"] for r in rs); i = rs[0]["ideal_s"]; s = st.median(r["static_s"] for r in rs)
    e = [r["of_ideal"] for r in rs]
    print(f"| `{a}` | {m:.3f} | {i:.3f} | {s:.3f} | {i/m:.3f} ({min(e):.3f}-{max(e):.3f}) | {i/s:.3f} | {all(r['exact'] for r in rs)} |")
PY
cat "$out.md"
