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
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "missing: ${missing[*]}; install with: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
}

need_redis() {
  need_packages redis-server redis-server redis-cli redis-tools
}
