#!/usr/bin/env bash
# Benchmark: `ddftp get` against aria2c, axel, xrdcp and a static 4-way curl
# split, on netbed's 4 mirrors (320/240/160/80 mbit), a 512 MiB file:
#   static, dynamic (mirror 1 drops to 40mbit 2 s in), and static over a
#   200 ms round trip (delayline, 100 ms each way, in front of every server).
# Prints medians of RUNS runs and efficiency = ideal / median, the ideal
# from one-stream TCP goodput per link measured in the same run.
#
# ddftp runs twice: as users run it (every block verified against the
# mirrors' chunk manifest, `ddftp`) and with `--no-verify` (`ddftp-noverify`),
# to show what verification costs. The data is indexed (`ddftpd index`)
# before the servers start, as an operator would.
#
# HTTPS: every nginx also serves HTTPS on :8443 with a certificate from a
# CA made for the run (the tools are given that CA); the case `https` is
# the static case with the HTTP tools on https:// URLs.
# ddftp's own CPU time (user + sys) and peak RSS are recorded per run.
#
# Usage (root): benches/netbed-get.sh [RUNS] [CASES]
#   CASES: comma list of static,dynamic,rtt,https (default static,dynamic,rtt)
#   TOOLS (env): space list (default: ddftp ddftp-noverify aria2c axel xrdcp split;
#     also ddftp-http: ddftp from the nginx mirrors the anchors use;
#     ddftp-tls: ddftp from ddftpd over TLS, ddftps:// on :7443;
#     xrdcp-tls: xrdcp over roots:// from xrootd with TLS on :1095)
#   OLD (env): a directory holding another build's ddftp and ddftpd (e.g. a
#     worktree's target/release): its ddftpd also runs on every mirror
#     (:7401) and the tool `ddftp-old` is that client against those servers,
#     for an A/B in one run (add it to TOOLS). The tools take turns run after
#     run, so a slow stretch of this shared VM hits them alike.
# Writes benches/results/netbed-get-<UTC date>.{md,json}.
set -euo pipefail

RUNS=${1:-3}
CASES=${2:-static,dynamic,rtt}
TOP=$(cd "$(dirname "$0")/.." && pwd)
NB=$(cd "$TOP/../shared/testbed" && pwd)/netbed
BED=ddb
WORK=${WORK:-/tmp/ddftp-bench}
SIZE=$((512 * 1024 * 1024))
PROBE=$((64 * 1024 * 1024))
RATES=(320mbit 240mbit 160mbit 80mbit)
M=${#RATES[@]}

. "$(dirname "$0")/common.sh"
log() { echo "[$(date +%T)] $*" >&2; }

need() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}
need aria2 axel nginx-light curl xrootd-server xrootd-client iproute2 python3 procps openssl time

cd "$TOP"
cargo build --release -q --bins
cargo build --release -q --manifest-path ../shared/testbed/delayline/Cargo.toml --target-dir target/delayline
DDFTP=$TOP/target/release/ddftp
DDFTPD=$TOP/target/release/ddftpd
DELAY=$TOP/target/delayline/release/delayline

cleanup() {
  "$NB" down $BED 2>/dev/null || true
}
trap cleanup EXIT
"$NB" down $BED 2>/dev/null || true
"$NB" up $BED --mirrors "$(IFS=,; echo "${RATES[*]}")" >/dev/null

mkdir -p "$WORK/data" "$WORK/out" "$WORK/run"
chmod 755 "$WORK" "$WORK/data"
if [ "$(stat -c %s "$WORK/data/big.bin" 2>/dev/null || echo 0)" != "$SIZE" ]; then
  log "generating $SIZE bytes"
  head -c $SIZE /dev/urandom > "$WORK/data/big.bin"
fi
head -c $PROBE "$WORK/data/big.bin" > "$WORK/data/probe.bin"
SRC_SHA=$(sha256sum "$WORK/data/big.bin" | cut -d' ' -f1)
"$DDFTPD" index "$WORK/data" >&2
PKI=$WORK/pki
test_pki "$PKI" $(for i in $(seq 1 $M); do echo 10.77.$i.2; done)
# The CA as an OpenSSL hashed directory, for XRootD's client and servers.
mkdir -p "$PKI/certs" && cp "$PKI/ca.pem" "$PKI/certs/" && openssl rehash "$PKI/certs" && chmod -R a+rX "$PKI/certs"
chmod a+x "$PKI"
TOOLS=${TOOLS:-ddftp ddftp-noverify aria2c axel xrdcp split}
id xrdbench >/dev/null 2>&1 || useradd -r -M -s /usr/sbin/nologin xrdbench

# Servers on every mirror: ddftpd :7400, ddftpd over TLS :7443, nginx :8080
# (and HTTPS :8443), xrootd :1094, and a delayline (100 ms each way) in
# front of each: :17400, :17443, :18080, :18443, :11094.
for i in $(seq 1 $M); do
  ip=10.77.$i.2; run=$WORK/run/m$i; mkdir -p "$run"; chmod 1777 "$run"
  "$NB" exec $BED-m$i -- "$DDFTPD" --root "$WORK/data" --listen $ip:7400 >"$run/ddftpd.log" 2>&1 &
  "$NB" exec $BED-m$i -- "$DDFTPD" --root "$WORK/data" --listen $ip:7443 --tls-cert "$PKI/srv.pem" \
    --tls-key "$PKI/srv.key" >"$run/ddftpd-tls.log" 2>&1 &
  if [ -n "${OLD:-}" ]; then
    "$NB" exec $BED-m$i -- "$OLD/ddftpd" --root "$WORK/data" --listen $ip:7401 >"$run/ddftpd-old.log" 2>&1 &
    "$NB" exec $BED-m$i -- "$DELAY" $ip:17401 $ip:7401 100 >"$run/delay-7401.log" 2>&1 &
  fi
  nginx_conf "$run" $ip:8080 "$WORK/data" 1 \
    "listen $ip:8443 ssl; ssl_certificate $PKI/srv.pem; ssl_certificate_key $PKI/srv.key;"
  "$NB" exec $BED-m$i -- nginx -c "$run/nginx.conf"
  printf 'all.export %s\nxrd.port 1094\n' "$WORK/data" >"$run/xrd.cfg"
  # xrootd will not run as root (-R drops to a user) and wants its cwd writable.
  (cd "$run" && "$NB" exec $BED-m$i -- xrootd -R xrdbench -c "$run/xrd.cfg" -n m$i -a "$run/adm" >"$run/xrootd.log" 2>&1) &
  # XRootD over TLS (roots://, everything encrypted) on :1095 with the
  # run's certificate; its key must be readable by the user xrootd runs as.
  mkdir -p "$run/tls" && cp "$PKI/srv.pem" "$PKI/srv.key" "$run/tls/" && chown -R xrdbench "$run/tls"
  printf 'all.export %s\nxrd.port 1095\nxrd.tls %s %s\nxrd.tlsca certdir %s\nxrootd.tls all\n' "$WORK/data" \
    "$run/tls/srv.pem" "$run/tls/srv.key" "$PKI/certs" >"$run/xrd-tls.cfg"
  (cd "$run" && "$NB" exec $BED-m$i -- xrootd -R xrdbench -c "$run/xrd-tls.cfg" -n m${i}tls -a "$run/adm-tls" \
    >"$run/xrootd-tls.log" 2>&1) &
  for p in 7400 7443 8080 1094 1095 8443; do
    "$NB" exec $BED-m$i -- "$DELAY" $ip:1$p $ip:$p 100 >"$run/delay-$p.log" 2>&1 &
  done
done
sleep 2

warm() { cat "$WORK/data/big.bin" >/dev/null; }
now() { date +%s.%N; }
N=0

# in_client CMD...: run in the client host.
in_client() { "$NB" exec $BED-c -- "$@"; }

metalink() { # port [scheme] -> path of a meta4 naming all mirrors
  local f=$WORK/run/big-$1.meta4 scheme=${2:-root}
  {
    echo '<?xml version="1.0" encoding="UTF-8"?>'
    echo '<metalink xmlns="urn:ietf:params:xml:ns:metalink"><file name="big.bin">'
    echo "<size>$SIZE</size>"
    for i in $(seq 1 $M); do echo "<url priority=\"$i\">$scheme://10.77.$i.2:$1/$WORK/data/big.bin</url>"; done
    echo '</file></metalink>'
  } >"$f"
  echo "$f"
}

# run_tool NAME PORTS_SUFFIX OUT: one timed download; prints seconds.
run_tool() {
  local name=$1 d=$2 out=$3 t0 t1
  local dd=$((7400 + d)) http=$((8080 + d)) xrd=$((1094 + d)) scheme=http
  if [ -n "${HTTPS:-}" ]; then scheme=https; http=$((8443 + d)); fi
  local urls=() mirrors=()
  for i in $(seq 1 $M); do urls+=("$scheme://10.77.$i.2:$http/big.bin"); mirrors+=("10.77.$i.2:$dd"); done
  # ddftp's CPU seconds (user, sys) and peak RSS (KiB).
  local timed=(/usr/bin/time -o "$out.time" -f "%U %S %M")
  warm
  t0=$(now)
  case $name in
    ddftp) in_client "${timed[@]}" "$DDFTP" get big.bin --mirrors "$(IFS=,; echo "${mirrors[*]}")" -o "$out" -q --json >"$out.json" ;;
    ddftp-old) local old=()
      for i in $(seq 1 $M); do old+=("10.77.$i.2:$((dd + 1))"); done
      in_client "${timed[@]}" "$OLD/ddftp" get big.bin --mirrors "$(IFS=,; echo "${old[*]}")" -o "$out" -q --json >"$out.json" ;;
    ddftp-http) # the same nginx mirrors the anchors use
      local hm=()
      for i in $(seq 1 $M); do hm+=("$scheme://10.77.$i.2:$http/"); done
      in_client "${timed[@]}" "$DDFTP" get big.bin --mirrors "$(IFS=,; echo "${hm[*]}")" -o "$out" -q --json \
        --ca-file "$PKI/ca.pem" >"$out.json" ;;
    ddftp-tls) # ddftpd over TLS (:7443, the run's CA)
      local tm=()
      for i in $(seq 1 $M); do tm+=("ddftps://10.77.$i.2:$((7443 + d))"); done
      in_client "${timed[@]}" "$DDFTP" get big.bin --mirrors "$(IFS=,; echo "${tm[*]}")" -o "$out" -q --json \
        --ca-file "$PKI/ca.pem" >"$out.json" ;;
    ddftp-noverify) in_client "${timed[@]}" "$DDFTP" get big.bin --mirrors "$(IFS=,; echo "${mirrors[*]}")" -o "$out" -q --json \
      --no-verify >"$out.json" ;;
    aria2c) in_client aria2c -q -s16 -x4 -k1M --file-allocation=none --allow-overwrite=true --ca-certificate="$PKI/ca.pem" \
      --dir "$(dirname "$out")" -o "$(basename "$out")" "${urls[@]}" ;;
    # axel checks a certificate's host name only against DNS names, not the
    # IP addresses netbed's mirrors have: over HTTPS it runs --insecure.
    axel) in_client env SSL_CERT_FILE="$PKI/ca.pem" axel -q -n 4 ${HTTPS:+--insecure} -o "$out" "${urls[@]}" >/dev/null ;;
    xrdcp) in_client xrdcp -f -s -y 4 "$(metalink $xrd)" "$out" ;;
    xrdcp-tls) in_client env X509_CERT_DIR="$PKI/certs" xrdcp -f -s -y 4 "$(metalink $((xrd + 1)) roots)" "$out" ;;
    split) # static equal 4-way split, one curl range per mirror into one file
      local part=$((SIZE / M)) pids=()
      : >"$out"
      for i in $(seq 0 $((M - 1))); do
        local a=$((i * part)) b=$(((i + 1) * part - 1))
        [ $i = $((M - 1)) ] && b=$((SIZE - 1))
        in_client sh -c "curl -s --cacert $PKI/ca.pem -r $a-$b ${urls[$i]} | dd of=$out bs=1M seek=$a oflag=seek_bytes conv=notrunc status=none" &
        pids+=($!)
      done
      wait "${pids[@]}" ;;
    *) echo "unknown tool $name" >&2; return 2 ;;
  esac
  t1=$(now)
  python3 -c "print(f'{$t1 - $t0:.3f}')"
}

# One stream per link (curl from nginx, 64 MiB): goodput in bytes/s.
goodputs=()
for i in $(seq 1 $M); do
  best=0
  for r in 1 2; do
    t0=$(now); in_client curl -s -o /dev/null "http://10.77.$i.2:8080/probe.bin"; t1=$(now)
    best=$(python3 -c "print(max($best, $PROBE / ($t1 - $t0)))")
  done
  goodputs+=("$best")
  log "link $i (${RATES[$((i - 1))]}): one TCP stream $(python3 -c "print(f'{$best/1e6:.2f}')") MB/s"
done
G=$(python3 -c "print(sum([$(IFS=,; echo "${goodputs[*]}")]))")
G1=${goodputs[0]}

results=()
record() { # case tool ideal times...
  local c=$1 tool=$2 ideal=$3; shift 3
  results+=("$(python3 -c "
import json, statistics, sys
t = [float(x) for x in sys.argv[1:]]
m = statistics.median(t)
print(json.dumps({'case': '$c', 'tool': '$tool', 'runs': t, 'median': m, 'ideal': $ideal, 'efficiency': $ideal / m}))
" "$@")")
  log "$c $tool: runs $* -> median $(python3 -c "import statistics,sys; print(statistics.median(map(float,sys.argv[1:])))" "$@") s"
}

check_out() { # out tool
  local sha; sha=$(sha256sum "$1" | cut -d' ' -f1)
  [ "$sha" = "$SRC_SHA" ] || { log "WRONG OUTPUT from $2 ($1)"; exit 1; }
}

ddftp_extra=()
bench_case() { # case d(port offset) ideal [dynamic]
  local c=$1 d=$2 ideal=$3 dyn=${4:-}
  declare -A times=()
  for r in $(seq 1 "$RUNS"); do
    for tool in $TOOLS; do
      N=$((N + 1)); local out=$WORK/out/o$N
      if [ -n "$dyn" ]; then
        "$NB" rate $BED m1 1 320mbit
        ( sleep 2; "$NB" rate $BED m1 1 40mbit ) &
        local rp=$!
      fi
      times[$tool]+="$(run_tool $tool "$d" "$out") "
      [ -n "$dyn" ] && { wait $rp || true; "$NB" rate $BED m1 1 320mbit; }
      check_out "$out" $tool
      if [[ $tool = ddftp* ]]; then ddftp_extra+=("$(python3 -c "
import json; j = json.load(open('$out.json')); j['case'] = '$c'
j['tool'] = '$tool'
u, s, rss = open('$out.time').read().split()[-3:]
j['cpu_s'] = float(u) + float(s); j['max_rss_kib'] = int(rss)
print(json.dumps({k: j[k] for k in ('case', 'tool', 'seconds', 'verified', 'starts', 'extends', 'ends', 'duplicate_bytes', 'producers', 'cpu_s', 'max_rss_kib')}))")"); fi
      rm -f "$out" "$out.json" "$out.time"
    done
  done
  for tool in $TOOLS; do
    # shellcheck disable=SC2086
    record "$c" $tool "$ideal" ${times[$tool]}
  done
}

IDEAL_STATIC=$(python3 -c "print($SIZE / $G)")
IFS=, read -r -a cases <<<"$CASES"
for c in "${cases[@]}"; do
  case $c in
    static) bench_case static 0 "$IDEAL_STATIC" ;;
    rtt) bench_case rtt200ms 10000 "$(python3 -c "print($IDEAL_STATIC + 0.2)")" ;;
    https) HTTPS=1 bench_case https-static 0 "$IDEAL_STATIC" ;;
    dynamic)
      # Capacity drops at t = 2 s from G to G - G1 + G1 * 40/320.
      bench_case dynamic 0 "$(python3 -c "
G, G1 = $G, $G1
left = $SIZE - 2 * G
print(2 + left / (G - G1 + G1 * 40 / 320) if left > 0 else $SIZE / G)")" dyn ;;
    *) echo "unknown case $c" >&2; exit 2 ;;
  esac
done

stamp=$(date -u +%Y-%m-%dT%H%MZ)
mkdir -p "$TOP/benches/results"
json=$TOP/benches/results/netbed-get-$stamp.json
md=$TOP/benches/results/netbed-get-$stamp.md
python3 - "$json" "$md" "$stamp" "$RUNS" "${goodputs[*]}" "${results[@]}" "::" "${ddftp_extra[@]}" <<'PY'
import json, sys, platform, os
jpath, mdpath, stamp, runs, goodputs = sys.argv[1:6]
rest = sys.argv[6:]
sep = rest.index("::")
results = [json.loads(x) for x in rest[:sep]]
extra = [json.loads(x) for x in rest[sep + 1:]]
g = [float(x) for x in goodputs.split()]
doc = {"when": stamp, "runs_per_tool": int(runs), "file_bytes": 512 * 1024 * 1024,
       "links": ["320mbit", "240mbit", "160mbit", "80mbit"], "one_stream_goodput_Bps": g,
       "results": results, "ddftp_runs": extra, "host": platform.node(), "cpus": os.cpu_count()}
json.dump(doc, open(jpath, "w"), indent=1)
with open(mdpath, "w") as f:
    f.write(f"# netbed get benchmark, {stamp}\n\n")
    f.write("Command: `benches/netbed-get.sh %s` (root), netbed `--mirrors 320mbit,240mbit,160mbit,80mbit`, "
            "512 MiB file (page cache warmed before each run, fresh output name each run, removed outside the timing), "
            "2 cores shared by client and all servers.\n\n" % runs)
    f.write("One TCP stream per link (curl, 64 MiB): " + ", ".join(f"{x/1e6:.2f} MB/s" for x in g) +
            f"; sum {sum(g)/1e6:.2f} MB/s.\n\n")
    f.write("| case | tool | median s | ideal s | efficiency | runs |\n|---|---|---|---|---|---|\n")
    for r in results:
        f.write(f"| {r['case']} | {r['tool']} | {r['median']:.2f} | {r['ideal']:.2f} | {r['efficiency']:.3f} | "
                + ", ".join(f"{t:.2f}" for t in r['runs']) + " |\n")
    f.write("\nddftp runs (shares per mirror, control messages, duplicates):\n\n")
    for e in extra:
        shares = ", ".join(f"{p['share']*100:.1f}%" for p in e["producers"])
        v = "verified" if e["verified"] else ("--no-verify" if e["tool"] == "ddftp-noverify" else "no per-block hashes")
        cpu = f"; CPU {e['cpu_s']:.2f} s ({e['cpu_s'] / (512 << 20) * 1e9:.2f} ns/byte), peak RSS {e['max_rss_kib'] / 1024:.0f} MiB" if 'cpu_s' in e else ""
        f.write(f"- {e['case']} {e.get('tool', 'ddftp')} ({v}): {e['seconds']:.2f} s; shares {shares}; {e['starts']} Start, {e['extends']} Extend, "
                f"{e['ends']} End; duplicate bytes {e['duplicate_bytes']}{cpu}\n")
print(open(mdpath).read())
PY
