#!/usr/bin/env bash
# Memory and CPU of a 2 GiB `ddftp get` from 4 HTTP mirrors (nginx on
# 127.0.0.1, file and output in /dev/shm), and from the same over HTTPS:
# peak RSS (the issue asks < 64 MiB) and CPU seconds per GiB, against
# aria2c on the same mirrors.
# Usage (root or not): benches/http-rss.sh [RUNS]
set -euo pipefail
RUNS=${1:-3}
TOP=$(cd "$(dirname "$0")/.." && pwd)
. "$TOP/benches/common.sh"
W=$(mktemp -d /dev/shm/ddftp-rss.XXXX)
trap 'for p in $W/m*/nginx.pid; do kill "$(cat "$p")" 2>/dev/null || true; done; rm -rf "$W"' EXIT
cd "$TOP" && cargo build --release -q --bins
mkdir -p "$W/data" "$W/out"
chmod 755 "$W" "$W/data"  # nginx workers run as another user
head -c $((2 << 30)) /dev/urandom >"$W/data/big.bin"
test_pki "$W/pki" 127.0.0.1
urls=() surls=()
for i in 1 2 3 4; do
  mkdir -p "$W/m$i"
  nginx_conf "$W/m$i" 127.0.0.1:$((18080 + i)) "$W/data" 1 \
    "listen 127.0.0.1:$((18443 + i)) ssl; ssl_certificate $W/pki/srv.pem; ssl_certificate_key $W/pki/srv.key;"
  nginx -c "$W/m$i/nginx.conf"
  urls+=("http://127.0.0.1:$((18080 + i))/big.bin"); surls+=("https://127.0.0.1:$((18443 + i))/big.bin")
done
sleep 1
stamp=$(date -u +%Y-%m-%dT%H%MZ)
out=$TOP/benches/results/http-rss-$stamp.md
{
  echo "# 2 GiB from 4 local nginx mirrors: peak RSS and CPU, $stamp"
  echo
  echo "Command: \`benches/http-rss.sh $RUNS\`; file and output in /dev/shm, loopback (CPU-bound: 2 cores for client and servers)."
  echo
  echo "| tool | scheme | s | CPU s (user+sys) | CPU s per GiB | peak RSS MiB |"
  echo "|---|---|---|---|---|---|"
} >"$out"
for r in $(seq 1 "$RUNS"); do
  for scheme in http https; do
    u=("${urls[@]}"); [ $scheme = https ] && u=("${surls[@]}")
    rm -f "$W/out/o"
    /usr/bin/time -o "$W/t" -f "%e %U %S %M" "$TOP/target/release/ddftp" get "${u[@]}" -o "$W/out/o" -q --ca-file "$W/pki/ca.pem"
    read -r e us sy m <"$W/t"
    cmp -s "$W/out/o" "$W/data/big.bin" || { echo "WRONG OUTPUT" >&2; exit 1; }
    python3 -c "print(f'| ddftp | $scheme | {$e:.2f} | {$us+$sy:.2f} | {($us+$sy)/2:.2f} | {$m/1024:.0f} |')" >>"$out"
    rm -f "$W/out/o"
    /usr/bin/time -o "$W/t" -f "%e %U %S %M" aria2c -q -s16 -x4 -k1M --file-allocation=none --ca-certificate="$W/pki/ca.pem" \
      --dir "$W/out" -o o "${u[@]}"
    read -r e us sy m <"$W/t"
    python3 -c "print(f'| aria2c | $scheme | {$e:.2f} | {$us+$sy:.2f} | {($us+$sy)/2:.2f} | {$m/1024:.0f} |')" >>"$out"
  done
done
cat "$out"
