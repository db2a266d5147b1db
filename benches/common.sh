# Shared by the benchmark scripts: sourced, not run.

# nginx_conf RUNDIR LISTEN ROOT WORKERS: writes RUNDIR/nginx.conf for a
# static-file nginx (sendfile, no logs) serving ROOT on LISTEN.
nginx_conf() {
  local run=$1 listen=$2 root=$3 workers=$4
  cat >"$run/nginx.conf" <<NGX
worker_processes $workers;
pid $run/nginx.pid;
error_log $run/nginx.err;
events { worker_connections 256; }
http {
  access_log off; sendfile on; tcp_nopush on;
  client_body_temp_path $run; proxy_temp_path $run; fastcgi_temp_path $run; uwsgi_temp_path $run; scgi_temp_path $run;
  server { listen $listen; root $root; }
}
NGX
}
