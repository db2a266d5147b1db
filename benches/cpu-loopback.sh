#!/usr/bin/env bash
# Benchmark (issue 58): wall and CPU seconds per GiB on loopback, in one
# sitting, rounds interleaved (each round runs every case once):
#
# - 1 GiB from tmpfs to tmpfs: `ddftp get` from 2 ddftpd, `ddftp get` from
#   2 nginx (HTTP mirrors), curl from one nginx, aria2c -x4 from it;
# - the same 1 GiB to a file on this machine's disk (ext4): ddftp from 2
#   ddftpd with and without --direct, curl (the output removed and synced
#   outside the timing);
# - a byte stream: `ddftp send | recv` over loopback against iperf3;
# - the floor: the cheapest receivers this machine runs
#   (client/examples/receive_floor.rs: blocking sockets, no runtime, no
#   protocol, from nginx) with and without BLAKE3 of every block, over one
#   connection and two, through memory or spliced.
#
# Client CPU is GNU time's user + sys of the command; server CPU is the
# servers' own (ddftpd processes, nginx's worker, `recv`, iperf3 -s) from
# /proc/PID/stat around each run. Every ddftp block is verified (BLAKE3
# against the mirrors' manifest; pieces of HTTP mirrors: their whole
# SHA-256 computed). The source is in tmpfs: nothing is read from disk.
#
# Usage (root): benches/cpu-loopback.sh [RUNS]
#   BIN=DIR: ddftp and ddftpd from DIR (an A/B against another build)
# Writes benches/results/cpu-loopback-<UTC date>.{md,json}.
set -euo pipefail

RUNS=${1:-6}
TOP=$(cd "$(dirname "$0")/.." && pwd)
. "$TOP/benches/common.sh"
SRC=/dev/shm/ddftp-cpu/src
SHM_OUT=/dev/shm/ddftp-cpu/out
DISK_OUT=${DISK_OUT:-/var/tmp/ddftp-cpu-out}
RUN=/dev/shm/ddftp-cpu/run
GIB=$((1 << 30))
log() { echo "[$(date +%T)] $*" >&2; }
for p in aria2 nginx-light curl time iperf3 python3; do
  dpkg -s $p >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $p >/dev/null; }
done

cd "$TOP"
[ -n "${BIN:-}" ] || cargo build --release -q --bins
cargo build --release -q -p ddftp --example receive_floor
FLOOR=$TOP/target/release/examples/receive_floor
BIN=${BIN:-$TOP/target/release}
mkdir -p "$SRC" "$SHM_OUT" "$DISK_OUT" "$RUN"
[ "$(stat -c %s "$SRC/big" 2>/dev/null || echo 0)" = $GIB ] || head -c $GIB /dev/urandom >"$SRC/big"
SHA=$(sha256sum "$SRC/big" | cut -d' ' -f1)
"$BIN/ddftpd" index "$SRC" >&2

pids=()
cleanup() {
  kill "${pids[@]}" 2>/dev/null || true
  nginx -c "$RUN/nginx.conf" -s stop 2>/dev/null || true
  rm -rf "$SHM_OUT" "$DISK_OUT"
}
trap cleanup EXIT
for port in 7711 7712; do
  "$BIN/ddftpd" --root "$SRC" --listen 127.0.0.1:$port >"$RUN/ddftpd-$port.log" 2>&1 &
  pids+=($!)
done
DDFTPDS="${pids[*]}"
# One worker: its CPU is the server's whole CPU.
nginx_conf "$RUN" 127.0.0.1:8711 "$SRC" 1 "listen 127.0.0.1:8712;"
nginx -c "$RUN/nginx.conf"
iperf3 -s -p 5711 >/dev/null 2>&1 &
IPERF=$!
pids+=($IPERF)
sleep 1
NGINX=$(pgrep -P "$(cat "$RUN/nginx.pid")" | tr '\n' ' ')

# Seconds of CPU the processes PIDS have used (user + system).
cpu_of() {
  local t=0 p
  for p in "$@"; do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat")))
  done
  python3 -c "print($t / $(getconf CLK_TCK))"
}

ROWS=$RUN/rows.jsonl
: >"$ROWS"
# case LABEL OUTDIR SERVER_PIDS CMD...: one timed run (OUT in CMD is a
# fresh output path in OUTDIR), its output checked and removed after.
case_run() {
  local label=$1 dir=$2 servers=$3; shift 3
  local out=$dir/o args=() a
  for a in "$@"; do args+=("${a//OUT/$out}"); done
  rm -f "$out"
  # shellcheck disable=SC2086
  local s0; s0=$(cpu_of $servers)
  /usr/bin/time -f "%e %U %S" -o "$RUN/time" "${args[@]}" >/dev/null 2>"$RUN/err" || { log "$label failed: $(tail -3 "$RUN/err")"; exit 1; }
  # shellcheck disable=SC2086
  local s1; s1=$(cpu_of $servers)
  if [ -f "$out" ] && [ "$(sha256sum "$out" | cut -d' ' -f1)" != "$SHA" ]; then
    log "WRONG OUTPUT from $label"
    exit 1
  fi
  rm -f "$out" "$out.ddftp-journal"
  sync
  read -r wall user sys <"$RUN/time"
  echo "{\"case\": \"$label\", \"wall\": $wall, \"client\": $(python3 -c "print($user + $sys)"), \"server\": $(python3 -c "print($s1 - $s0)")}" >>"$ROWS"
  log "$label: wall $wall client $(python3 -c "print($user + $sys)") server $(python3 -c "print(round($s1 - $s0, 3))")"
}

# `ddftp send` to a `recv` started for the run (recv is the server side,
# its CPU from its own GNU time).
send_recv() {
  /usr/bin/time -f "%U %S" -o "$RUN/rtime" "$BIN/ddftp" recv --listen 127.0.0.1:7799 -q >/dev/null &
  local r=$!
  sleep 0.3
  /usr/bin/time -f "%e %U %S" -o "$RUN/time" "$BIN/ddftp" send --links 127.0.0.1:7799 -q <"$SRC/big" 2>"$RUN/err"
  wait $r
  read -r wall user sys <"$RUN/time"
  read -r ruser rsys <"$RUN/rtime"
  echo "{\"case\": \"ddftp send | recv\", \"wall\": $wall, \"client\": $(python3 -c "print($user + $sys)"), \"server\": $(python3 -c "print($ruser + $rsys)")}" >>"$ROWS"
  log "send | recv: wall $wall send $(python3 -c "print($user + $sys)") recv $(python3 -c "print($ruser + $rsys)")"
}

M="127.0.0.1:7711,127.0.0.1:7712"
H="http://127.0.0.1:8711/big,http://127.0.0.1:8712/big"
for r in $(seq "$RUNS"); do
  log "round $r"
  case_run "tmpfs: ddftp (2 ddftpd)" "$SHM_OUT" "$DDFTPDS" "$BIN/ddftp" get big --mirrors "$M" -o OUT -q
  case_run "tmpfs: ddftp (2 nginx)" "$SHM_OUT" "$NGINX" "$BIN/ddftp" get big --mirrors "$H" -o OUT -q
  case_run "tmpfs: curl (nginx)" "$SHM_OUT" "$NGINX" curl -s -o OUT http://127.0.0.1:8711/big
  case_run "tmpfs: aria2c -x4 (nginx)" "$SHM_OUT" "$NGINX" aria2c -q -x4 -s4 --file-allocation=none \
    --allow-overwrite=true -d / -o OUT http://127.0.0.1:8711/big
  case_run "disk: ddftp (2 ddftpd)" "$DISK_OUT" "$DDFTPDS" "$BIN/ddftp" get big --mirrors "$M" -o OUT -q
  case_run "disk: ddftp --direct (2 ddftpd)" "$DISK_OUT" "$DDFTPDS" "$BIN/ddftp" get big --mirrors "$M" -o OUT -q --direct
  case_run "disk: curl (nginx)" "$DISK_OUT" "$NGINX" curl -s -o OUT http://127.0.0.1:8711/big
  case_run "iperf3 (1 GiB)" "$SHM_OUT" "$IPERF" iperf3 -c 127.0.0.1 -p 5711 -n 1G
  send_recv
  for m in copy copy-verify splice splice-verify; do
    case_run "floor: $m, 1 connection" "$SHM_OUT" "$NGINX" "$FLOOR" $m 1 $GIB OUT 127.0.0.1:8711 big
  done
  case_run "floor: copy-verify, 2 connections" "$SHM_OUT" "$NGINX" "$FLOOR" copy-verify 2 $GIB OUT "127.0.0.1:8711,127.0.0.1:8712" big
done

stamp=$(date -u +%Y-%m-%dT%H%MZ)
mkdir -p "$TOP/benches/results"
python3 - "$TOP/benches/results/cpu-loopback-$stamp" "$stamp" "$RUNS" "$ROWS" "$(git -C "$TOP" rev-parse --short HEAD)" <<'PY'
import json, statistics, sys
base, stamp, runs, rows, head = sys.argv[1:6]
rows = [json.loads(l) for l in open(rows)]
cases = list(dict.fromkeys(r["case"] for r in rows))
med = lambda c, k: statistics.median(r[k] for r in rows if r["case"] == c)
for r in rows:
    r["total"] = r["client"] + r["server"]
res = [{"case": c, "wall_s": med(c, "wall"), "client_cpu_s": med(c, "client"), "server_cpu_s": med(c, "server"),
        "total_cpu_s": med(c, "total"),
        "runs": [r for r in rows if r["case"] == c]} for c in cases]
json.dump({"when": stamp, "head": head, "runs": int(runs), "results": res}, open(base + ".json", "w"), indent=1)
by = {r["case"]: r for r in res}
def ratio(a, b, k):
    return f"{by[a][k] / by[b][k]:.2f}x" if a in by and b in by and by[b][k] > 0 else "-"
with open(base + ".md", "w") as f:
    f.write(f"# CPU per GiB on loopback, {stamp} ({head})\n\nCommand: `benches/cpu-loopback.sh {runs}` (root). "
            "1 GiB in tmpfs served by 2 ddftpd and one nginx (1 worker, sendfile, two ports) on 127.0.0.1; "
            "client and servers on the same 2 cores. Medians of the rounds (interleaved). Seconds for the GiB = "
            "seconds per GiB. On loopback the kernel's work for the receiving socket runs in whichever "
            "process's context it happens to (the sender's when it sends, the receiver's when it reads): "
            "client and server alone move between them from run to run, their sum (total) does not.\n\n")
    f.write("| case | wall s | client CPU s | server CPU s | total CPU s |\n|---|---|---|---|---|\n")
    for r in res:
        f.write(f"| {r['case']} | {r['wall_s']:.3f} | {r['client_cpu_s']:.3f} | {r['server_cpu_s']:.3f} "
                f"| {r['total_cpu_s']:.3f} |\n")
    f.write("\nRatios (same sitting):\n\n")
    for a, b, k, what in [
        ("tmpfs: ddftp (2 ddftpd)", "tmpfs: curl (nginx)", "client_cpu_s", "ddftp client CPU / curl's (tmpfs)"),
        ("tmpfs: ddftp (2 ddftpd)", "tmpfs: curl (nginx)", "total_cpu_s", "ddftp total CPU / curl's (tmpfs)"),
        ("tmpfs: ddftp (2 ddftpd)", "tmpfs: curl (nginx)", "wall_s", "ddftp wall / curl's (tmpfs)"),
        ("disk: ddftp (2 ddftpd)", "disk: curl (nginx)", "client_cpu_s", "ddftp client CPU / curl's (disk)"),
        ("disk: ddftp (2 ddftpd)", "disk: curl (nginx)", "wall_s", "ddftp wall / curl's (disk)"),
        ("disk: ddftp --direct (2 ddftpd)", "disk: curl (nginx)", "client_cpu_s", "ddftp --direct client CPU / curl's (disk)"),
        ("disk: ddftp --direct (2 ddftpd)", "disk: curl (nginx)", "wall_s", "ddftp --direct wall / curl's (disk)"),
        ("tmpfs: ddftp (2 ddftpd)", "tmpfs: curl (nginx)", "server_cpu_s", "ddftpd CPU per GiB served / nginx's"),
    ]:
        f.write(f"- {what}: {ratio(a, b, k)}\n")
    for a, b, what in [
        ("floor: copy, 1 connection", "tmpfs: curl (nginx)", "floor without checks, 1 connection / curl"),
        ("floor: splice, 1 connection", "tmpfs: curl (nginx)", "floor spliced without checks, 1 connection / curl"),
        ("floor: copy-verify, 1 connection", "tmpfs: curl (nginx)", "floor with BLAKE3, 1 connection / curl"),
        ("floor: splice-verify, 1 connection", "tmpfs: curl (nginx)", "floor spliced with BLAKE3, 1 connection / curl"),
        ("floor: copy-verify, 2 connections", "tmpfs: curl (nginx)", "floor with BLAKE3, 2 connections / curl"),
        ("tmpfs: ddftp (2 ddftpd)", "floor: copy-verify, 2 connections", "ddftp / its floor (BLAKE3, 2 connections)"),
    ]:
        f.write(f"- {what}: client CPU {ratio(a, b, 'client_cpu_s')}, total {ratio(a, b, 'total_cpu_s')}\n")
    if "ddftp send | recv" in by and "iperf3 (1 GiB)" in by:
        s, i = by["ddftp send | recv"], by["iperf3 (1 GiB)"]
        both = (s["client_cpu_s"] + s["server_cpu_s"]) / (i["client_cpu_s"] + i["server_cpu_s"])
        f.write(f"- send + recv CPU / iperf3 client + server: {both:.2f}x\n")
print(open(base + ".md").read())
PY
