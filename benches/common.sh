# Shared by the benchmark scripts: sourced, not run.

# nginx_conf RUNDIR LISTEN ROOT WORKERS [EXTRA]: writes RUNDIR/nginx.conf
# for a static-file nginx (sendfile, no logs) serving ROOT on LISTEN; EXTRA
# goes in its server block (e.g. an HTTPS listen and its certificate).
nginx_conf() {
  local run=$1 listen=$2 root=$3 workers=$4 extra=${5:-}
  cat >"$run/nginx.conf" <<NGX
worker_processes $workers;
pid $run/nginx.pid;
error_log $run/nginx.err;
events { worker_connections 256; }
http {
  access_log off; sendfile on; tcp_nopush on;
  client_body_temp_path $run; proxy_temp_path $run; fastcgi_temp_path $run; uwsgi_temp_path $run; scgi_temp_path $run;
  server { listen $listen; root $root; $extra }
}
NGX
}

# test_pki DIR IP...: a private CA (DIR/ca.pem) and a server certificate
# for those addresses (DIR/srv.pem, DIR/srv.key), as for a site's own CA.
test_pki() {
  local dir=$1; shift
  mkdir -p "$dir"
  [ -s "$dir/srv.pem" ] && return 0
  # Each address also as a DNS name: XRootD's client checks a host only
  # against DNS names (rustls, curl and aria2 use the IP entries).
  local san="" a
  for a in "$@"; do san+="IP:$a,DNS:$a,"; done
  san=${san%,}
  (cd "$dir" &&
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 30 \
      -subj "/CN=ddftp bench CA" 2>/dev/null &&
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout srv.key -out srv.csr \
      -subj "/CN=ddftp bench mirror" 2>/dev/null &&
    echo "subjectAltName=$san" >ext.cnf &&
    openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 30 \
      -extfile ext.cnf 2>/dev/null)
}

# nics_bed BED RATES: for `send`/`recv` over netbed NICs. Builds the
# binaries (BIN: ddftp), makes WORK/in (256 MiB of random bytes, kept
# between runs), brings BED up with --nics RATES (down again at exit) and
# sets `links` to the receiver's addresses, one per NIC, port 7600.
# Needs TOP, NB and WORK set.
nics_bed() {
  local bed=$1 rates=$2 n=0 r
  cd "$TOP"
  cargo build --release -q --bins
  BIN=$TOP/target/release/ddftp
  mkdir -p "$WORK"
  [ "$(stat -c %s "$WORK/in" 2>/dev/null || echo 0)" = $((256 << 20)) ] || head -c $((256 << 20)) /dev/urandom > "$WORK/in"
  # shellcheck disable=SC2064
  trap "\"$NB\" down $bed >/dev/null 2>&1 || true" EXIT
  "$NB" down "$bed" >/dev/null 2>&1 || true
  "$NB" up "$bed" --nics "$rates" >/dev/null
  links=""
  IFS=, read -r -a rs <<<"$rates"
  for r in "${rs[@]}"; do n=$((n + 1)); links+="10.78.$n.2:7600,"; done
  links=${links%,}
}

# listing: type, size, mode, mtime, path and link target of every entry
# below the current directory, hashed (two trees compare equal or not).
listing() {
  find . \( -type d -printf 'd - %m %T@ %p\n' \) -o \( ! -type d -printf '%y %s %m %T@ %p %l\n' \) | sort | md5sum
}
