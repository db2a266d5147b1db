#!/usr/bin/env bash
# Tree walk benchmark: ddftp walk against find -printf and fd on a generated
# tree of 200,000 files in 21,621 directories, warm cache, medians of RUNS.
#
#   bash benches/walk.sh [RUNS] [TREE]     (default 3, /tmp/ddftp-walk-tree)
#
# Every tool writes its listing to /dev/null; find and ddftp lstat every
# entry (find for %s), fd needs no stat (it reads d_type). `floor-1t` is
# tree/examples/stat_floor.rs: one thread doing only getdents64 and an
# lstat per entry; its time over the cores is the least any walk that
# lstats every entry can take here. Writes benches/results/walk-<UTC stamp>.md.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
TREE=${2:-/tmp/ddftp-walk-tree}
command -v fdfind >/dev/null || { apt-get update -qq && apt-get install -y -qq fd-find >/dev/null; }
cargo build --release -q -p ddftp -p ddtree --example stat_floor
DDFTP=$PWD/target/release/ddftp
FLOOR=$PWD/target/release/examples/stat_floor
if [ ! -e "$TREE/.complete" ]; then
  rm -rf "$TREE"; mkdir -p "$TREE"
  python3 benches/make-tree.py "$TREE"
  touch "$TREE/.complete"
fi
declare -A CMD=(
  [find]="find $TREE -printf '%s %p\n' >/dev/null"
  [fd-j2]="fdfind -u -j2 . $TREE >/dev/null"
  [ddftp-t2]="$DDFTP walk $TREE -t 2 -q"
  [ddftp-t2-list]="$DDFTP walk $TREE -t 2 -o - -q >/dev/null"
  [ddftp-t4-list]="$DDFTP walk $TREE -t 4 -o - -q >/dev/null"
  [floor-1t]="$FLOOR $TREE >/dev/null"
)
ORDER=(find fd-j2 ddftp-t2 ddftp-t2-list ddftp-t4-list floor-1t)
declare -A TIMES
for t in "${ORDER[@]}"; do eval "${CMD[$t]}"; done   # warm the cache
for r in $(seq "$RUNS"); do
  for t in "${ORDER[@]}"; do
    s=$(date +%s.%N); eval "${CMD[$t]}"; e=$(date +%s.%N)
    TIMES[$t]+="$(echo "$e - $s" | bc) "
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
STAMP=$(date -u +%Y-%m-%dT%H%MZ)
OUT=benches/results/walk-$STAMP.md
entries=$($DDFTP walk "$TREE" --json | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["dirs"], "dirs,", j["files"], "files")')
fmed=$(echo "${TIMES[find]}" | median)
fdmed=$(echo "${TIMES[fd-j2]}" | median)
{
  echo "# Tree walk, $STAMP"
  echo
  echo "Tree: $TREE ($entries), warm cache; $(nproc) cores; medians of $RUNS runs (\`bash benches/walk.sh $RUNS\`)."
  echo
  echo "| tool | command | median s | all runs | find / tool | fd / tool |"
  echo "|---|---|---|---|---|---|"
  for t in "${ORDER[@]}"; do
    m=$(echo "${TIMES[$t]}" | median)
    echo "| $t | \`${CMD[$t]//$TREE/TREE}\` | $m | ${TIMES[$t]} | $(echo "scale=2; $fmed / $m" | bc) | $(echo "scale=2; $fdmed / $m" | bc) |"
  done
  bound=$(echo "scale=4; $(echo "${TIMES[floor-1t]}" | median) / $(nproc)" | bc)
  echo
  echo "Bound: floor-1t / $(nproc) cores = $bound s, the least a walk that lstats every entry can take here; fd-j2 / bound = $(echo "scale=2; $fdmed / $bound" | bc)."
} | tee "$OUT"
