#!/usr/bin/env bash
# `ddftp get` from HTTP mirrors: the netbed-get.sh cases (static, dynamic,
# 200 ms, then static over HTTPS) with ddftp reading the same nginx mirrors
# as aria2c, axel and the curl split.
# Usage (root): benches/netbed-http.sh [RUNS] [CASES]
set -euo pipefail
TOOLS=${TOOLS:-"ddftp-http aria2c axel split"} exec "$(dirname "$0")/netbed-get.sh" "${1:-3}" "${2:-static,dynamic,rtt,https}"
