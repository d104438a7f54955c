# Shared by scripts/*: make sure the system packages rlock's scripts need exist.

# need_packages CMD PACKAGE [CMD PACKAGE ...]: installs each missing command's package.
need_packages() {
  local missing=()
  while [ $# -ge 2 ]; do
    command -v "$1" >/dev/null 2>&1 || missing+=("$2")
    shift 2
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "missing: ${missing[*]}; install with: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
}

# need_python_module MODULE SPEC: installs SPEC (a pinned pip requirement) when
# python3 cannot import MODULE.
need_python_module() {
  need_packages python3 python3
  python3 -c "import $1" >/dev/null 2>&1 && return 0
  need_packages pip3 python3-pip
  echo "== pip install $2"
  python3 -m pip install -q "$2" || python3 -m pip install -q --break-system-packages "$2"
}

need_redis() {
  need_packages redis-server redis-server redis-cli redis-tools
}

# start_redis: a throwaway redis-server on a free 127.0.0.1 port, stopped (by
# PID) and its directory removed when the calling script exits. Sets $port,
# $work and $redis_pid.
start_redis() {
  need_packages python3 python3
  work=$(mktemp -d)
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
    --logfile "$work/redis.log" &
  redis_pid=$!
  trap 'kill "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null; rm -rf "$work"' EXIT
  for _ in $(seq 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "redis-server did not start; see $work/redis.log" >&2
  exit 1
}

# start_etcd: a throwaway single-node etcd on free 127.0.0.1 ports (installs
# etcd-server and etcd-client when missing), stopped by PID when the calling
# script exits (after start_redis, whose cleanup it extends). Sets $etcd_port.
start_etcd() {
  need_packages etcd etcd-server etcdctl etcd-client
  local peer
  etcd_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  peer=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  etcd --name bench --data-dir "$work/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "bench=http://127.0.0.1:$peer" >"$work/etcd.log" 2>&1 &
  etcd_pid=$!
  trap 'kill "$etcd_pid" "$redis_pid" 2>/dev/null; wait "$etcd_pid" "$redis_pid" 2>/dev/null; rm -rf "$work"' EXIT
  for _ in $(seq 200); do
    ETCDCTL_API=3 etcdctl --endpoints="127.0.0.1:$etcd_port" endpoint health >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "etcd did not start; see $work/etcd.log" >&2
  exit 1
}

# need_musl_target: the x86_64 musl standard library (rustup) and musl-gcc (for
# the C parts of the TLS library), installed when missing; exports the C
# compiler cargo uses for that target.
need_musl_target() {
  if ! rustup target list --installed 2>/dev/null | grep -qx x86_64-unknown-linux-musl; then
    echo "== rustup target add x86_64-unknown-linux-musl"
    rustup target add x86_64-unknown-linux-musl
  fi
  need_packages musl-gcc musl-tools
  export CC_x86_64_unknown_linux_musl=${CC_x86_64_unknown_linux_musl:-musl-gcc}
}
