#!/usr/bin/env bash
# Benchmark: `ddftp archive` from 4 ssh mirrors (no daemon: `ddftpd
# session` started over ssh by the command) against the same 4 mirrors
# run as ddftpd, and against `rsync -a -e ssh` from the fastest mirror, in
# one sitting. netbed: 4 mirrors at 320/240/160/80 mbit, each running
# sshd on its address (port 22, its own host key; the client logs in with
# a key made here).
#
# Tree (`tree`): 256 files of 2 MiB and 1,000 of 16 KiB, 528 MB. Cases:
#   first   a first copy into an empty DEST
#   resync  DEST holds the tree as it was before 1% of its files (26)
#           were rewritten on the mirrors (new bytes, new mtime); the copy
#           is put back untimed before every run; `--delete` for both
#   big     a first copy of a larger tree (`big`: 1,024 files of 2 MiB,
#           2 GiB), ssh mirrors and ddftpd only: what the fixed cost of
#           the logins weighs on a copy of a size sites move
# Every run ends with DEST compared with the tree (diff -r). Warm page
# cache; the digests computed once before (an untimed run of each kind:
# ddftpd's index beside the tree, the sessions' in ~/.cache/ddftpd).
# "of ideal": bytes / (0.956 x the links' rates): the 4 links for ddftp,
# mirror 1's for rsync.
#
# `--via-ssh`: the same 4 ssh mirrors with every connection carried
# inside ssh (a forwarded port per mirror), for hosts where only ssh gets
# through. "ssh login alone": `ssh HOST true` to mirror 1, the start every
# ssh-started mirror (and rsync -e ssh) pays before its first byte; then
# what else the ssh mirrors cost over running ddftpds, and the ddftpds
# speaking TLS (as ssh mirrors always do; certificates made here).
#
# Usage (root): benches/netbed-ssh.sh [RUNS] [CASES]   (CASES: first,resync,big)
# Writes benches/results/netbed-ssh-<UTC date>.md.
set -euo pipefail

RUNS=${1:-3}
CASES=${2:-first,resync}
TOP=$(cd "$(dirname "$0")/.." && pwd)
NB=$(cd "$TOP/../shared/testbed" && pwd)/netbed
BED=dsh
WORK=${WORK:-/tmp/ddftp-ssh-bench}
OUT=${OUT:-/dev/shm/ddftp-ssh-out}
RATES=(320mbit 240mbit 160mbit 80mbit)
log() { echo "[$(date +%T)] $*" >&2; }

for p in rsync openssh-server openssh-client iproute2 openssl; do
  dpkg -s "$p" >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq "$p" >/dev/null; }
done
cd "$TOP"
cargo build --release -q --bins
DDFTP=$TOP/target/release/ddftp
DDFTPD=$TOP/target/release/ddftpd

DATA=$WORK/data
mkdir -p "$WORK/run" "$WORK/keys" "$OUT"
chmod 755 "$WORK"
if [ ! -e "$DATA/.complete" ]; then
  log "generating the tree"
  rm -rf "$DATA" "$WORK/old"
  mkdir -p "$DATA/tree/big" "$DATA/tree/small"
  for i in $(seq 1 256); do head -c $((2 << 20)) /dev/urandom >"$DATA/tree/big/b$i"; done
  for i in $(seq 1 1000); do head -c 16384 /dev/urandom >"$DATA/tree/small/s$i"; done
  cp -a "$DATA/tree" "$WORK/old"
  # 1% of the files rewritten: 3 big and 23 small, an hour later (made
  # within the same second, size and mtime would say "unchanged" to both
  # tools' quick check).
  for i in 7 77 177; do head -c $((2 << 20)) /dev/urandom >"$DATA/tree/big/b$i"; touch -d '+1 hour' "$DATA/tree/big/b$i"; done
  for i in $(seq 10 43 1000); do head -c 16384 /dev/urandom >"$DATA/tree/small/s$i"; touch -d '+1 hour' "$DATA/tree/small/s$i"; done
  touch "$DATA/.complete"
fi
chmod 755 "$DATA"
if [[ ,$CASES, == *,big,* && ! -e "$DATA/.big" ]]; then
  log "generating the big tree"
  rm -rf "$DATA/big" && mkdir -p "$DATA/big"
  for i in $(seq 1 1024); do head -c $((2 << 20)) /dev/urandom >"$DATA/big/b$i"; done
  touch "$DATA/.big"
fi
BYTES=$(find "$DATA/tree" -type f -printf '%s\n' | awk '{s+=$1} END {printf "%.0f", s}')
BIG_BYTES=$(find "$DATA/big" -type f -printf '%s\n' 2>/dev/null | awk '{s+=$1} END {printf "%.0f", s}')

K=$WORK/keys
[ -s "$K/id" ] || ssh-keygen -q -t ed25519 -N '' -f "$K/id"
[ -s "$K/host" ] || ssh-keygen -q -t ed25519 -N '' -f "$K/host"
cp "$K/id.pub" "$K/authorized_keys"
mkdir -p /run/sshd
RSH="ssh -F /dev/null -i $K/id -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no -o BatchMode=yes -o LogLevel=ERROR"

cleanup() {
  pkill -f "ddftpd --root $DATA" 2>/dev/null || true
  pkill -f "sshd -f $WORK/run/sshd" 2>/dev/null || true
  "$NB" down $BED 2>/dev/null || true
}
trap cleanup EXIT
"$NB" down $BED 2>/dev/null || true
"$NB" up $BED --mirrors "$(IFS=,; echo "${RATES[*]}")" >/dev/null
for i in 1 2 3 4; do
  cat >"$WORK/run/sshd-$i.conf" <<CONF
Port 22
ListenAddress 10.77.$i.2
HostKey $K/host
AuthorizedKeysFile $K/authorized_keys
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin prohibit-password
PidFile $WORK/run/sshd-$i.pid
CONF
  "$NB" exec $BED-m$i -- /usr/sbin/sshd -f "$WORK/run/sshd-$i.conf"
done

ddftpds() { # fresh ddftpd on every mirror: each run a first archive
  pkill -f "ddftpd --root $DATA" 2>/dev/null || true
  sleep 0.2
  for i in 1 2 3 4; do
    "$NB" exec $BED-m$i -- "$DDFTPD" --root "$DATA" --listen 10.77.$i.2:7400 -q >>"$WORK/run/ddftpd-$i.log" 2>&1 &
  done
  for i in 1 2 3 4; do
    until "$NB" exec $BED-c -- bash -c "exec 3<>/dev/tcp/10.77.$i.2/7400" 2>/dev/null; do sleep 0.05; done
  done
}
# The same ddftpds speaking TLS (as an ssh mirror always does): a CA and
# one certificate for the 4 addresses, made here.
if [ ! -s "$K/srv.pem" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj /CN=bench-ca \
    -keyout "$K/ca.key" -out "$K/ca.pem" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=mirrors -keyout "$K/srv.key" \
    -out "$K/srv.csr" 2>/dev/null
  printf 'subjectAltName=IP:10.77.1.2,IP:10.77.2.2,IP:10.77.3.2,IP:10.77.4.2\n' >"$K/san"
  openssl x509 -req -in "$K/srv.csr" -CA "$K/ca.pem" -CAkey "$K/ca.key" -CAcreateserial -days 30 \
    -extfile "$K/san" -out "$K/srv.pem" 2>/dev/null
fi
tls_ddftpds() {
  pkill -f "ddftpd --root $DATA" 2>/dev/null || true
  sleep 0.2
  for i in 1 2 3 4; do
    "$NB" exec $BED-m$i -- "$DDFTPD" --root "$DATA" --listen 10.77.$i.2:7401 --tls-cert "$K/srv.pem" \
      --tls-key "$K/srv.key" -q >>"$WORK/run/ddftpd-$i.log" 2>&1 &
  done
  for i in 1 2 3 4; do
    until "$NB" exec $BED-c -- bash -c "exec 3<>/dev/tcp/10.77.$i.2/7401" 2>/dev/null; do sleep 0.05; done
  done
}
TLS_M=ddftps://10.77.1.2:7401,ddftps://10.77.2.2:7401,ddftps://10.77.3.2:7401,ddftps://10.77.4.2:7401
SSH_M=$(for i in 1 2 3 4; do printf 'ssh://10.77.%s.2%s,' "$i" "$DATA"; done)
SSH_M=${SSH_M%,}
DD_M=10.77.1.2:7400,10.77.2.2:7400,10.77.3.2:7400,10.77.4.2:7400

# tool CASE TOOL DEST: runs one tool into DEST
tool() {
  local del=()
  [ "$1" = resync ] && del=(--delete)
  case $2 in
    ssh) "$NB" exec $BED-c -- "$DDFTP" archive "$SRC" -m "$SSH_M" -e "$RSH" --remote-ddftpd "$DDFTPD" --dest "$3" -q "${del[@]}" ;;
    via) "$NB" exec $BED-c -- "$DDFTP" archive "$SRC" -m "$SSH_M" -e "$RSH" --remote-ddftpd "$DDFTPD" --dest "$3" -q --via-ssh "${del[@]}" ;;
    ddftpd) "$NB" exec $BED-c -- "$DDFTP" archive "$SRC" -m "$DD_M" --dest "$3" -q "${del[@]}" ;;
    tls) "$NB" exec $BED-c -- "$DDFTP" archive "$SRC" -m "$TLS_M" --ca-file "$K/ca.pem" --dest "$3" -q "${del[@]}" ;;
    rsync) "$NB" exec $BED-c -- rsync -a "${del[@]}" -e "$RSH" "10.77.1.2:$DATA/$SRC/" "$3/" ;;
  esac
}

# Digests and page cache warm, untimed.
log "warming"
ddftpds
find "$DATA" -type f -exec cat {} + >/dev/null
SRC=tree
for t in ssh via ddftpd; do rm -rf "$OUT/warm"; tool first $t "$OUT/warm"; done
if [[ ,$CASES, == *,big,* ]]; then
  SRC=big
  for t in ssh ddftpd; do rm -rf "$OUT/warm"; tool first $t "$OUT/warm"; done
fi
tls_ddftpds
SRC=tree
rm -rf "$OUT/warm"; tool first tls "$OUT/warm"
rm -rf "$OUT/warm"

declare -A T=()
IFS=, read -r -a cases <<<"$CASES"
for c in "${cases[@]}"; do
  SRC=tree TOOLS="ssh via ddftpd tls rsync login"
  [ "$c" = big ] && SRC=big TOOLS="ssh ddftpd login"
  for r in $(seq 1 "$RUNS"); do
    for t in $TOOLS; do
      if [ $t = login ]; then # one ssh login alone: what any ssh-started mirror pays first
        t0=$(date +%s.%N)
        "$NB" exec $BED-c -- $RSH 10.77.1.2 true
        t1=$(date +%s.%N)
        s=$(python3 -c "print(f'{$t1 - $t0:.2f}')")
        log "$c login run $r: $s s"
        T[$c-$t]+="$s "
        continue
      fi
      rm -rf "$OUT/d"
      [ "$c" = resync ] && cp -a "$WORK/old" "$OUT/d"
      [ "$t" = ddftpd ] && ddftpds
      [ "$t" = tls ] && tls_ddftpds
      t0=$(date +%s.%N)
      tool "$c" $t "$OUT/d"
      t1=$(date +%s.%N)
      diff -r -q "$OUT/d" "$DATA/$SRC" >/dev/null || { log "$t $c: the copy differs"; exit 1; }
      s=$(python3 -c "print(f'{$t1 - $t0:.2f}')")
      log "$c $t run $r: $s s"
      T[$c-$t]+="$s "
    done
  done
done

stamp=$(date -u +%Y-%m-%dT%H%MZ)
md=$TOP/benches/results/netbed-ssh-$stamp.md
{
  echo "# ssh mirrors against ddftpd mirrors and rsync -e ssh ($stamp)"
  echo
  echo "Command: \`benches/netbed-ssh.sh $RUNS $CASES\` (root). netbed --mirrors ${RATES[*]}, sshd on each; tree of $BYTES bytes (256 x 2 MiB + 1,000 x 16 KiB); resync: 1% of the files rewritten, --delete; big: a first copy of $BIG_BYTES bytes (1,024 x 2 MiB), ssh and ddftpd only."
  echo "Wall seconds, median of $RUNS (all runs in brackets); of ideal: bytes / (0.956 x link rates: all 4 for ddftp, mirror 1 for rsync); first copies only."
  echo
  echo "| case | ddftp, 4 ssh mirrors | ddftp, 4 ddftpd mirrors | rsync -a -e ssh, mirror 1 | ddftp, 4 ssh mirrors --via-ssh | ssh / ddftpd (speed) | ddftp ssh / rsync (speed) | --via-ssh / ssh (speed) | ssh login alone | ssh - ddftpd - login | ddftp, 4 ddftpd mirrors, TLS | ssh / ddftpd TLS (speed) |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
  for c in "${cases[@]}"; do
    b=$BYTES
    [ "$c" = big ] && b=$BIG_BYTES
    python3 - "$c" "$b" "${T[$c-ssh]:-}" "${T[$c-ddftpd]:-}" "${T[$c-rsync]:-}" "${T[$c-via]:-}" "${T[$c-login]:-}" "${T[$c-tls]:-}" <<'PY'
import statistics, sys
c, b = sys.argv[1], int(sys.argv[2])
runs = [list(map(float, a.split())) for a in sys.argv[3:9]]
m = [statistics.median(x) if x else None for x in runs]
ideal = [b / (0.956 * 800e6 / 8), b / (0.956 * 800e6 / 8), b / (0.956 * 320e6 / 8), b / (0.956 * 800e6 / 8)]
def cell(i):
    if m[i] is None:
        return "-"
    s = f"{m[i]:.2f} s ({', '.join(f'{x:.2f}' for x in runs[i])})"
    return s + (f", {ideal[i] / m[i]:.3f} of ideal" if c in ("first", "big") and i < 4 else "")
def ratio(a, d, fmt):
    return "-" if m[a] is None or m[d] is None else fmt.format(m[a] / m[d])
left = "-" if None in (m[0], m[1], m[4]) else f"{m[0] - m[1] - m[4]:.2f} s"
print(f"| {c} | {cell(0)} | {cell(1)} | {cell(2)} | {cell(3)} | {ratio(1, 0, '{:.3f}')} | {ratio(2, 0, '{:.2f}x')} | {ratio(0, 3, '{:.3f}')} | {cell(4)} | {left} | {cell(5)} | {ratio(5, 0, '{:.3f}')} |")
PY
  done
  echo
  echo "Build: $(git -C "$TOP" rev-parse --short HEAD)."
} >"$md"
log "wrote $md"
cat "$md"
