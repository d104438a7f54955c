#!/usr/bin/env bash
# Handoff latency: N processes start at once, each runs a ~20 ms job under one
# lock; the gap between one job's end and the next one's start is measured for
# rlock and, side by side in the same run, for flock(1) (the kernel floor).
#
#   bench/handoff.sh [PROCESSES]      (default 21 processes = 20 handoffs)
#
# Builds rlock in release mode and starts its own redis-server on a free
# 127.0.0.1 port; prints median / p90 / max gap per tool and rlock's ratio to
# flock, checks mutual exclusion from the recorded intervals, and counts the
# Redis commands rlock sent per acquisition (INFO commandstats: scripts, script
# loads and BLPOPs; commands run inside scripts are not separate round trips).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
need_redis
need_packages flock util-linux python3 python3

procs=${1:-21}
cargo build --release --quiet
rlock=$PWD/target/release/rlock
start_redis

job='s=$(date +%s%N); sleep 0.02; echo "$s $(date +%s%N)" >> "$LOG"'

run_tool() { # name, then the command prefix that takes the lock
  local name=$1; shift
  export LOG="$work/$name.log"
  : >"$LOG"
  local pids=()
  for _ in $(seq "$procs"); do
    "$@" sh -c "$job" & pids+=($!)
  done
  wait "${pids[@]}"
}

top_level_calls() {
  redis-cli -p "$port" info commandstats |
    awk -F'[:,=]' '/^cmdstat_(evalsha|eval|blpop|script\|load|rpush|ping):/ { n += $3 } END { print n + 0 }'
}

redis-cli -p "$port" config resetstat >/dev/null
run_tool rlock "$rlock" --url "redis://127.0.0.1:$port" run bench --
echo "$(top_level_calls) $procs" >"$work/commands"
run_tool flock flock "$work/flock.lock"

python3 - "$work" <<'PY'
import json, statistics, sys
work = sys.argv[1]
def gaps(tool):
    iv = sorted(tuple(map(int, l.split())) for l in open(f"{work}/{tool}.log"))
    for a, b in zip(iv, iv[1:]):
        assert a[1] <= b[0], f"{tool}: overlapping holds {a} {b}"
    return [(b[0] - a[1]) / 1e6 for a, b in zip(iv, iv[1:])]
res = {}
for tool in ("rlock", "flock"):
    g = sorted(gaps(tool))
    res[tool] = {"handoffs": len(g), "median_ms": statistics.median(g),
                 "p90_ms": g[int(0.9 * (len(g) - 1))], "max_ms": g[-1]}
print(f"{'tool':6} {'handoffs':>8} {'median ms':>10} {'p90 ms':>8} {'max ms':>8}")
for tool, r in res.items():
    print(f"{tool:6} {r['handoffs']:>8} {r['median_ms']:>10.2f} {r['p90_ms']:>8.2f} {r['max_ms']:>8.2f}")
ratio = res["rlock"]["median_ms"] / max(res["flock"]["median_ms"], 1e-9)
print(f"rlock/flock median gap ratio: {ratio:.2f}  (mutual exclusion verified for both)")
calls, procs = map(int, open(f"{work}/commands").read().split())
res["rlock"]["redis_commands_per_acquisition"] = calls / procs
print(f"rlock: {calls / procs:.2f} Redis commands per acquisition with {procs} processes")
print(json.dumps(res))
PY
