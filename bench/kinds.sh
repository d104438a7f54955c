#!/usr/bin/env bash
# Redis commands per acquisition for each lock kind, at 4 and 32 processes
# started at once, each holding the lock ~20 ms: does a handoff cost the same
# whatever the number of waiters (no thundering herd)?
#
#   bench/kinds.sh
#
# Counts the round trips rlock makes (EVALSHA, EVAL, SCRIPT LOAD, BLPOP, RPUSH)
# from INFO commandstats; commands run inside the scripts are not round trips.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
need_redis
need_packages python3 python3

cargo build --release --quiet
rlock=$PWD/target/release/rlock
start_redis
url="redis://127.0.0.1:$port"

calls() {
  redis-cli -p "$port" info commandstats |
    awk -F'[:,=]' '/^cmdstat_(evalsha|eval|blpop|script\|load|rpush):/ { n += $3 - 0 } END { print n + 0 }'
}

# run_kind LABEL PROCS OPTIONS-FOR-EVEN OPTIONS-FOR-ODD
run_kind() {
  local label=$1 procs=$2 even=$3 odd=$4
  redis-cli -p "$port" config resetstat >/dev/null
  local pids=() i
  for i in $(seq "$procs"); do
    local opts=$even
    [ $((i % 2)) -eq 1 ] && opts=$odd
    # shellcheck disable=SC2086
    "$rlock" --url "$url" run $opts bench-$label -- sleep 0.02 & pids+=($!)
  done
  wait "${pids[@]}"
  printf '%-22s %4d processes: %5.2f commands per acquisition\n' "$label" "$procs" \
    "$(python3 -c "print($(calls) / $procs)")"
}

for procs in 4 32; do
  run_kind exclusive "$procs" "" ""
  run_kind shared+exclusive "$procs" "--shared" ""
  run_kind semaphore-3 "$procs" "--limit 3" "--limit 3"
  run_kind fair-exclusive "$procs" "--fair" "--fair"
  run_kind fair-shared+exclusive "$procs" "--fair --shared" "--fair"
done
