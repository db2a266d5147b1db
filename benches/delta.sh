#!/usr/bin/env bash
# Benchmark: updating an older copy (delta) with `ddftp get` against rsync
# (daemon mode, its delta algorithm on, as over any network) and zsync
# (a .zsync file over HTTP), on netbed: 2 mirrors at 320mbit (rsync and
# zsync use mirror 1; ddftp both), a 1 GiB file, one edit pattern a case:
#   edits    16 scattered 4 KiB edits
#   insert   1 MiB inserted at the start
#   remove   1 MiB removed in the middle
#   truncate the last 256 MiB cut off
#   extend   16 MiB appended
#   shuffle  the file's 1 MiB pieces in another order
# Each run starts from the old copy (copied to tmpfs) and ends with the new
# version checked byte for byte. "wire": bytes the client's links carried
# both ways (its netbed interfaces' counters: data, headers, checksums,
# all of it: rsync's client sends its block checksums, ddftp's and zsync's
# receive the mirror's); "rx": the received part alone; "time": wall
# seconds of the command. Medians of RUNS.
#
# "cp time": the old copy copied to a new file on the same tmpfs, timed
# the same way: what any tool that builds the new version beside the old
# (rsync, zsync, ddftp) spends at least, whatever it moves.
# "floor": what a delta update that checks what it lands must spend at
# least on this machine's 2 cores: the copy, one BLAKE3 pass (every chunk
# placed checked against its hash) and one SHA-256 pass (the whole file
# against the mirrors' digest), spread perfectly over both cores:
# max(cp, (cp + BLAKE3 + SHA-256) / 2), each hash timed on one core
# (client/examples/hash_cost.rs) in the same run.
#
#   tree     (archive) 1,000 files of 2 MiB, 5% of them with 4 KiB
#            changed (rewritten: a new mtime): `ddftp archive` against
#            `rsync -a` from the daemon (zsync has no trees)
#
# Usage (root): benches/delta.sh [RUNS] [CASES]
# Writes benches/results/delta-<UTC date>.md.
set -euo pipefail

RUNS=${1:-3}
CASES=${2:-edits,insert,remove,truncate,extend,shuffle,tree}
TOP=$(cd "$(dirname "$0")/.." && pwd)
. "$TOP/benches/common.sh"
NB=$(cd "$TOP/../shared/testbed" && pwd)/netbed
BED=dl
WORK=${WORK:-/tmp/ddftp-delta}
OUT=${OUT:-/dev/shm/ddftp-delta}
MIB=$((1 << 20))
SIZE=$((1024 * MIB))
log() { echo "[$(date +%T)] $*" >&2; }

for p in rsync zsync nginx-light iproute2; do
  dpkg -s "$p" >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq "$p" >/dev/null; }
done
cd "$TOP"
cargo build --release -q --bins
cargo build --release -q -p ddftp --example hash_cost
DDFTP=$TOP/target/release/ddftp
DDFTPD=$TOP/target/release/ddftpd
mkdir -p "$WORK/v" "$WORK/run" "$OUT"
chmod 755 "$WORK" "$WORK/v"
[ "$(stat -c %s "$WORK/old.bin" 2>/dev/null || echo 0)" = $SIZE ] || head -c $SIZE /dev/urandom >"$WORK/old.bin"

# The tree: the old one, and the new one the mirrors serve.
if [[ ,$CASES, == *,tree,* ]] && [ ! -d "$WORK/v/tree" ]; then
  python3 - "$WORK" <<'PY'
import os, random, shutil, sys
work = sys.argv[1]
old, new = f"{work}/treeold", f"{work}/v/tree.new"
r = random.Random(9)
for i in range(1000):
    d = f"{old}/d{i // 100:02d}"
    os.makedirs(d, exist_ok=True)
    with open(f"{d}/f{i:04d}", "wb") as f:
        f.write(os.urandom(2 << 20))
shutil.copytree(old, new)
for i in r.sample(range(1000), 50):
    p = f"{new}/d{i // 100:02d}/f{i:04d}"
    d = bytearray(open(p, "rb").read())
    at = r.randrange(len(d) - 4096)
    d[at:at + 4096] = os.urandom(4096)
    open(p + ".tmp", "wb").write(d)
    os.replace(p + ".tmp", p)
os.rename(new, f"{work}/v/tree")
PY
fi

# The new versions, one directory each, and their .zsync files.
IFS=, read -r -a cases <<<"$CASES"
for c in "${cases[@]}"; do
  [ "$c" = tree ] && continue
  d=$WORK/v/$c
  [ -s "$d/f.bin.zsync" ] && continue
  mkdir -p "$d"
  python3 - "$WORK/old.bin" "$d/f.bin" "$c" <<'PY'
import random, sys
old, new, case = sys.argv[1], sys.argv[2], sys.argv[3]
M = 1 << 20
d = bytearray(open(old, "rb").read())
r = random.Random(7)
if case == "edits":
    for k in range(16):
        at = k * (len(d) // 16) + r.randrange(len(d) // 16 - 4096)
        d[at:at + 4096] = r.randbytes(4096)
elif case == "insert":
    d[0:0] = r.randbytes(M)
elif case == "remove":
    del d[len(d) // 2:len(d) // 2 + M]
elif case == "truncate":
    del d[len(d) - 256 * M:]
elif case == "extend":
    d += r.randbytes(16 * M)
elif case == "shuffle":
    pieces = [d[i:i + M] for i in range(0, len(d), M)]
    r.shuffle(pieces)
    d = bytearray(b"".join(pieces))
open(new, "wb").write(d)
PY
  (cd "$d" && zsyncmake -o f.bin.zsync -u f.bin f.bin >/dev/null 2>&1)
done

cleanup() {
  pkill -f "ddftpd --root $WORK/v" 2>/dev/null || true
  pkill -f "nginx -c $WORK/run" 2>/dev/null || true
  pkill -f "rsync --daemon --config=$WORK/run" 2>/dev/null || true
  "$NB" down $BED 2>/dev/null || true
  rm -rf "$OUT"
}
trap cleanup EXIT
"$NB" down $BED 2>/dev/null || true
"$NB" up $BED --mirrors 320mbit,320mbit >/dev/null
M1=10.77.1.2 M2=10.77.2.2
# ddftpd computes the digests (and weak checksums) ahead, as an operator would.
"$DDFTPD" index "$WORK/v" >/dev/null 2>&1 || true
for i in 1 2; do
  "$NB" exec $BED-m$i -- "$DDFTPD" --root "$WORK/v" --listen 10.77.$i.2:7400 >"$WORK/run/ddftpd$i.log" 2>&1 &
done
nginx_conf "$WORK/run" $M1:8080 "$WORK/v" 1
"$NB" exec $BED-m1 -- nginx -c "$WORK/run/nginx.conf"
cat >"$WORK/run/rsyncd.conf" <<CONF
pid file = $WORK/run/rsyncd.pid
use chroot = no
[v]
  path = $WORK/v
  read only = yes
CONF
"$NB" exec $BED-m1 -- rsync --daemon --config="$WORK/run/rsyncd.conf" --address=$M1
sleep 1
# Bytes the client's links have received and sent: "RX TX".
counters() { "$NB" exec $BED-c -- awk -F'[: ]+' '/veth|eth|m[0-9]/ && $2 != "lo" {r += $3; t += $11} END {print r, t}' /proc/net/dev; }

# run CASE TOOL: prints "SECONDS WIRE_BYTES RX_BYTES" (cp: "SECONDS FLOOR_SECONDS 0")
run() {
  local c=$1 tool=$2 o=$OUT/f.bin t0 t1 r0 x0 r1 x1 b3 sha
  rm -rf "${OUT:?}"/*
  if [ "$c" = tree ]; then
    [ "$tool" = zsync ] || [ "$tool" = cp ] && { echo "nan nan nan"; return; }
    cp -a "$WORK/treeold" "$OUT/tree"
    read -r r0 x0 < <(counters)
    t0=$(date +%s.%N)
    case $tool in
      ddftp) "$NB" exec $BED-c -- "$DDFTP" archive tree -m $M1:7400,$M2:7400 -d "$OUT/tree" -q ;;
      rsync) "$NB" exec $BED-c -- rsync -a "rsync://$M1/v/tree/" "$OUT/tree/" ;;
    esac
    t1=$(date +%s.%N)
    read -r r1 x1 < <(counters)
    diff -r -q "$OUT/tree" "$WORK/v/tree" >/dev/null || { log "$tool tree: the result differs"; exit 1; }
    echo "$(python3 -c "print(f'{$t1 - $t0:.2f}')") $((r1 - r0 + x1 - x0)) $((r1 - r0))"
    return
  fi
  cp "$WORK/old.bin" "$o"
  if [ "$tool" = cp ]; then
    t0=$(date +%s.%N)
    cp --reflink=never "$o" "$o.copy"
    t1=$(date +%s.%N)
    read -r b3 sha < <("$TOP/target/release/examples/hash_cost" "$WORK/v/$c/f.bin")
    python3 -c "c = $t1 - $t0; print(f'{c:.2f} {max(c, (c + $b3 + $sha) / 2):.2f} 0')"
    return
  fi
  read -r r0 x0 < <(counters)
  t0=$(date +%s.%N)
  case $tool in
    ddftp) "$NB" exec $BED-c -- "$DDFTP" get "$c/f.bin" -m $M1:7400,$M2:7400 -o "$o" -q ;;
    rsync) "$NB" exec $BED-c -- rsync --no-whole-file "rsync://$M1/v/$c/f.bin" "$o" ;;
    zsync) (cd "$OUT" && "$NB" exec $BED-c -- zsync -q -i "$o" -o "$o.new" "http://$M1:8080/$c/f.bin.zsync" >/dev/null 2>&1 && mv "$o.new" "$o") ;;
  esac
  t1=$(date +%s.%N)
  read -r r1 x1 < <(counters)
  cmp -s "$o" "$WORK/v/$c/f.bin" || { log "$tool $c: the result differs"; exit 1; }
  echo "$(python3 -c "print(f'{$t1 - $t0:.2f}')") $((r1 - r0 + x1 - x0)) $((r1 - r0))"
}

stamp=$(date -u +%Y-%m-%dT%H%MZ)
md=$TOP/benches/results/delta-$stamp.md
{
  echo "# delta: updating a 1 GiB copy ($stamp)"
  echo
  echo "Command: \`benches/delta.sh $RUNS $CASES\` (root). netbed --mirrors 320mbit,320mbit; rsync (daemon, delta on) and zsync from mirror 1, ddftp from both."
  echo "wire: bytes the client's links carried both ways (MiB), rx: received alone; time: wall seconds; floor: max(cp, (cp + BLAKE3 + SHA-256 of the file) / 2 cores), the least a checked update spends here (median of $RUNS)."
  echo
  echo "| case | ddftp time | ddftp wire (rx) | rsync time | rsync wire (rx) | zsync time | zsync wire (rx) | cp time | floor | ddftp/rsync time | floor/rsync time | ddftp/rsync wire (rx) |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
} >"$md"
for c in "${cases[@]}"; do
  # Warm: the mirrors' digests (indexed ahead), the page cache.
  if [ "$c" = tree ]; then
    cat "$WORK"/v/tree/*/* "$WORK"/treeold/*/* >/dev/null
  else
    "$NB" exec $BED-c -- "$DDFTP" get "$c/f.bin" -m $M1:7400,$M2:7400 --check >/dev/null 2>&1 || true
    cat "$WORK/v/$c/f.bin" "$WORK/old.bin" >/dev/null
  fi
  declare -A T=() W=() X=()
  for r in $(seq 1 "$RUNS"); do
    for tool in ddftp rsync zsync cp; do
      read -r s w x < <(run "$c" $tool)
      log "$c $tool run $r: $s s; wire, received (bytes; cp: floor seconds): $w $x"
      T[$tool]+="$s "
      W[$tool]+="$w "
      X[$tool]+="$x "
    done
  done
  python3 - "$c" "${T[ddftp]}" "${W[ddftp]}" "${X[ddftp]}" "${T[rsync]}" "${W[rsync]}" "${X[rsync]}" "${T[zsync]}" "${W[zsync]}" "${X[zsync]}" "${T[cp]}" "${W[cp]}" "${X[cp]}" >>"$md" <<'PY'
import math, statistics, sys
c = sys.argv[1]
med = lambda a: statistics.median(map(float, a.split()))
t, w, x = [med(a) for a in sys.argv[2::3]], [med(a) / 2**20 for a in sys.argv[3::3]], [med(a) / 2**20 for a in sys.argv[4::3]]
# cp's "wire" column holds the floor, in seconds.
floor = w[3] * 2**20
ratio = lambda a, b: a / b if b and not math.isnan(b) else float("nan")
print(f"| {c} | {t[0]:.2f} | {w[0]:.2f} ({x[0]:.2f}) | {t[1]:.2f} | {w[1]:.2f} ({x[1]:.2f}) | {t[2]:.2f} | {w[2]:.2f} ({x[2]:.2f}) "
      f"| {t[3]:.2f} | {floor:.2f} | {ratio(t[0], t[1]):.2f} | {ratio(floor, t[1]):.2f} | {ratio(w[0], w[1]):.2f} ({ratio(x[0], x[1]):.2f}) |")
PY
  unset T W X
done
echo >>"$md"
echo "Build: $(git -C "$TOP" rev-parse --short HEAD)." >>"$md"
log "wrote $md"
cat "$md"
