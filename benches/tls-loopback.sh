#!/usr/bin/env bash
# TLS against plaintext on loopback: a 1 GiB `ddftp get` from 2 local
# ddftpd (file and output in /dev/shm), plaintext and TLS runs alternating
# in the same run. Reports medians of wall time and throughput, the ratio
# TLS / plaintext, and CPU seconds per GiB on the client (/usr/bin/time)
# and on the two servers (/proc/PID/stat before and after). Loopback is
# CPU-bound: client and both servers share the machine's cores.
# Also records whether the kernel offers kernel TLS (the `tls` ULP).
#
# Usage: benches/tls-loopback.sh [RUNS]
# Writes benches/results/tls-loopback-<UTC date>.md.
set -euo pipefail
RUNS=${1:-5}
TOP=$(cd "$(dirname "$0")/.." && pwd)
. "$TOP/benches/common.sh"
W=$(mktemp -d /dev/shm/ddftp-tls.XXXX)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$W"' EXIT
cd "$TOP" && cargo build --release -q --bins
D=$TOP/target/release
mkdir -p "$W/data" "$W/out"
head -c $((1 << 30)) /dev/urandom >"$W/data/big.bin"
"$D/ddftpd" index "$W/data" >/dev/null
test_pki "$W/pki" 127.0.0.1
for port in 7701 7702; do
  "$D/ddftpd" --root "$W/data" --listen 127.0.0.1:$port >/dev/null 2>&1 &
  pids+=($!)
done
for port in 7711 7712; do
  "$D/ddftpd" --root "$W/data" --listen 127.0.0.1:$port --tls-cert "$W/pki/srv.pem" --tls-key "$W/pki/srv.key" \
    >/dev/null 2>&1 &
  pids+=($!)
done
sleep 1
ticks=$(getconf CLK_TCK)
# CPU seconds (user + sys) of the given processes so far.
cpu() { for p in "$@"; do awk '{print $14 + $15}' "/proc/$p/stat"; done | awk -v t="$ticks" '{s += $1} END {printf "%.3f", s / t}'; }
rows=$W/rows
: >"$rows"
for r in $(seq 1 "$RUNS"); do
  for mode in plain tls; do
    case $mode in
      plain) m=127.0.0.1:7701,127.0.0.1:7702 srv=("${pids[0]}" "${pids[1]}") ;;
      tls) m=ddftps://127.0.0.1:7711,ddftps://127.0.0.1:7712 srv=("${pids[2]}" "${pids[3]}") ;;
    esac
    rm -f "$W/out/o"
    before=$(cpu "${srv[@]}")
    /usr/bin/time -o "$W/t" -f "%e %U %S" "$D/ddftp" get big.bin -m "$m" --ca-file "$W/pki/ca.pem" -o "$W/out/o" -q
    after=$(cpu "${srv[@]}")
    cmp -s "$W/out/o" "$W/data/big.bin" || { echo "WRONG OUTPUT ($mode)" >&2; exit 1; }
    read -r e us sy <"$W/t"
    echo "$mode $e $(echo "$us + $sy" | bc) $(echo "$after - $before" | bc)" >>"$rows"
  done
done
stamp=$(date -u +%Y-%m-%dT%H%MZ)
out=$TOP/benches/results/tls-loopback-$stamp.md
ulp=$(cat /proc/sys/net/ipv4/tcp_available_ulp 2>/dev/null || echo "?")
python3 - "$rows" "$RUNS" "$ulp" "$(uname -r)" "$(nproc)" >"$out" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
runs, ulp, kernel, cores = sys.argv[2:]
by = {m: [tuple(map(float, r[1:])) for r in rows if r[0] == m] for m in ("plain", "tls")}
med = {m: [st.median(x[i] for x in v) for i in range(3)] for m, v in by.items()}
print(f"# TLS against plaintext, loopback, 1 GiB from 2 ddftpd ({runs} runs each, alternating)\n")
print(f"Command: `benches/tls-loopback.sh {runs}`; file and output in /dev/shm; {cores} cores shared by the client and both servers; kernel {kernel}.\n")
print(f"Kernel TLS: `tcp_available_ulp` = `{ulp}`" + (" (no `tls`: only the user-space path can run here)" if "tls" not in ulp.split() else "") + ".\n")
print("| path | median s | GB/s | of plaintext | client CPU s/GiB | servers CPU s/GiB | runs (s) |")
print("|---|---|---|---|---|---|---|")
for m in ("plain", "tls"):
    e, c, s = med[m]
    ratio = med["plain"][0] / e
    name = "plaintext (sendfile)" if m == "plain" else "TLS 1.3, user space (rustls, AES-GCM)"
    runs_s = " ".join(f"{x[0]:.2f}" for x in by[m])
    print(f"| {name} | {e:.2f} | {(1 << 30) / e / 1e9:.2f} | {ratio:.2f} | {c:.2f} | {s:.2f} | {runs_s} |")
PY
cat "$out"
