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
