#!/usr/bin/env bash
# Uncontended overhead, throughput and memory, side by side in one run:
#   a. `TOOL NAME -- true` over a bare `true` (median, p90 of many runs);
#   d. 8 processes x 20 acquisitions of `true`: handoffs per second;
#   e. rlock's resident memory while it holds a lock.
# Tools: rlock, flock(1), etcdctl lock, a naive redis-cli SET NX loop.
#
#   bench/overhead.sh [RUNS]        (default 200)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
need_redis
need_packages flock util-linux python3 python3
runs=${1:-200}
cargo build --release --quiet
start_redis
start_etcd
export RLOCK_BIN=$PWD/target/release/rlock REDIS_PORT=$port ETCD_PORT=$etcd_port WORK=$work RUNS=$runs
python3 - <<'PY'
import os, statistics, subprocess, time, json
rl, rp, ep, work, runs = os.environ["RLOCK_BIN"], os.environ["REDIS_PORT"], os.environ["ETCD_PORT"], os.environ["WORK"], int(os.environ["RUNS"])
naive = ("until [ \"$(redis-cli -p %s set naive 1 NX PX 30000)\" = OK ]; do sleep 0.01; done; "
         "\"$@\"; redis-cli -p %s del naive >/dev/null") % (rp, rp)
tools = {
    "bare": [],
    "rlock": [rl, "--url", f"redis://127.0.0.1:{rp}", "run", "bench", "--"],
    "flock": ["flock", f"{work}/flock.lock"],
    "etcd": ["etcdctl", f"--endpoints=127.0.0.1:{ep}", "lock", "bench", "--"],
    "naive": ["sh", "-c", naive, "sh"],
}
env = dict(os.environ, ETCDCTL_API="3")
def once(prefix):
    t = time.perf_counter(); subprocess.run(prefix + ["true"], check=True, env=env); return (time.perf_counter() - t) * 1000
res = {}
for name, prefix in tools.items():
    once(prefix)
    xs = sorted(once(prefix) for _ in range(runs))
    res[name] = {"median_ms": statistics.median(xs), "p90_ms": xs[int(0.9 * (len(xs) - 1))]}
bare = res["bare"]["median_ms"]
print(f"{'tool':6} {'median ms':>10} {'p90 ms':>8} {'overhead ms':>12} {'vs flock':>9}")
flock_over = res["flock"]["median_ms"] - bare
for name, r in res.items():
    over = r["median_ms"] - bare
    r["overhead_ms"] = over
    ratio = over / flock_over if name != "bare" else 0
    print(f"{name:6} {r['median_ms']:>10.2f} {r['p90_ms']:>8.2f} {over:>12.2f} {ratio:>9.2f}")
# d. throughput
print()
for name, prefix in tools.items():
    if name == "bare": continue
    t = time.perf_counter()
    procs = [subprocess.Popen(["sh", "-c", 'for i in $(seq 20); do "$@" true; done', "sh"] + prefix, env=env) for _ in range(8)]
    for p in procs: p.wait()
    res[name]["handoffs_per_s"] = 160 / (time.perf_counter() - t)
for name in ("rlock", "flock", "etcd", "naive"):
    rate = res[name]["handoffs_per_s"]
    print(f"{name:6} throughput: {rate:7.1f} acquisitions/s  ({rate / res['flock']['handoffs_per_s']:.2f} of flock)")
# e. memory
p = subprocess.Popen([rl, "--url", f"redis://127.0.0.1:{rp}", "run", "mem", "--", "sleep", "1"])
time.sleep(0.5)
rss = next(l for l in open(f"/proc/{p.pid}/status") if l.startswith("VmRSS")).split()[1]
p.wait()
res["rlock"]["rss_kib"] = int(rss)
print(f"\nrlock resident memory while holding: {int(rss) / 1024:.2f} MiB")
print(json.dumps(res))
PY
