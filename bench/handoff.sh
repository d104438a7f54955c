#!/usr/bin/env bash
# Handoff latency: N processes start at once, each runs a ~20 ms job under one
# lock; the gap between one job's end and the next one's start is measured, side
# by side in one run, for rlock, flock(1) (the kernel floor), `etcdctl lock`, and
# a naive `redis-cli SET NX` + sleep loop.
#
#   bench/handoff.sh [PROCESSES]      (default 21 processes = 20 handoffs)
#
# Builds rlock in release mode and starts its own redis-server and etcd on free
# 127.0.0.1 ports (installing redis-server, etcd-server, etcd-client if missing); prints median / p90 / max gap per tool and rlock's ratio to
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
start_etcd

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
export ETCDCTL_API=3
run_tool etcd etcdctl --endpoints="127.0.0.1:$etcd_port" lock bench --
naive_lock() { # SET NX + sleep: what a script writes without a lock tool
  until [ "$(redis-cli -p "$port" set naive 1 NX PX 30000)" = OK ]; do sleep 0.01; done
  "$@"; local rc=$?
  redis-cli -p "$port" del naive >/dev/null
  return $rc
}
run_tool naive naive_lock

python3 - "$work" <<'PY'
import json, statistics, sys
work = sys.argv[1]
def gaps(tool):
    iv = sorted(tuple(map(int, l.split())) for l in open(f"{work}/{tool}.log"))
    for a, b in zip(iv, iv[1:]):
        assert a[1] <= b[0], f"{tool}: overlapping holds {a} {b}"
    return [(b[0] - a[1]) / 1e6 for a, b in zip(iv, iv[1:])]
res = {}
for tool in ("rlock", "flock", "etcd", "naive"):
    g = sorted(gaps(tool))
    res[tool] = {"handoffs": len(g), "median_ms": statistics.median(g),
                 "p90_ms": g[int(0.9 * (len(g) - 1))], "max_ms": g[-1]}
print(f"{'tool':6} {'handoffs':>8} {'median ms':>10} {'p90 ms':>8} {'max ms':>8}")
for tool, r in res.items():
    print(f"{tool:6} {r['handoffs']:>8} {r['median_ms']:>10.2f} {r['p90_ms']:>8.2f} {r['max_ms']:>8.2f}")
floor = max(res["flock"]["median_ms"], 1e-9)
for tool in ("rlock", "etcd", "naive"):
    print(f"{tool}/flock median gap ratio: {res[tool]['median_ms'] / floor:.2f}")
print("mutual exclusion verified from the intervals for every tool")
calls, procs = map(int, open(f"{work}/commands").read().split())
res["rlock"]["redis_commands_per_acquisition"] = calls / procs
print(f"rlock: {calls / procs:.2f} Redis commands per acquisition with {procs} processes")
print(json.dumps(res))
PY
