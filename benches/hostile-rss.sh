#!/usr/bin/env bash
# ddftpd's memory under a crowd of hostile clients (the hardening issue's
# "RSS under 256 MiB with 1,024 hostile connections, a normal client
# served within 2 s throughout").
#
#   bash benches/hostile-rss.sh [CONNECTIONS] [SECONDS]
#
# Runs it twice: with --max-connections above the crowd (the normal
# client must get a slot) and at the default 1024 (the crowd takes every
# slot: the normal client must be told "busy" at once, not time out).
# Writes benches/results/hostile-rss-<date>.json.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1024}
secs=${2:-30}
ulimit -n 65536 2>/dev/null || true
cargo build --release --bins --quiet
cargo build --release --quiet -p ddftp-tests --example hostile_load
stamp=$(date -u +%Y-%m-%dT%H%MZ)
out=benches/results/hostile-rss-$stamp.json
{
  echo "["
  ./target/release/examples/hostile_load target/release "$n" "$secs" $((n + 64))
  echo ","
  ./target/release/examples/hostile_load target/release "$n" "$secs" 1024
  echo "]"
} | tee "$out"
echo "command: bash benches/hostile-rss.sh $n $secs" >&2
