#!/usr/bin/env python3
"""How far before the server-side end of its lease a stalled holder's COMMAND
gets SIGTERM and is dead.

    bench/lease_margin.py RLOCK_BIN REDIS_PORT --ttl 1s --holders 10 --rounds 3

Each round starts HOLDERS runs of `rlock run --ttl TTL` on distinct locks, each
with a probe COMMAND that ignores SIGTERM (it records when it got it) and so
must be killed. When every probe runs, the server's writes are paused
(`CLIENT PAUSE WRITE`, which holds back scripts too) and each lock's lease
expiry is read (server ms, from the leases zset): no renewal can be confirmed
from then on. The probes' SIGTERM times come from the
probes; their deaths are seen through pidfds. Margin = lease expiry - event;
a negative margin would be a COMMAND outliving its lease. The server runs on
this host, so its clock and ours are the same clock.
"""

import argparse
import json
import os
import select
import subprocess
import sys
import tempfile
import time

PROBE = r"""
import os, signal, sys, time
out = sys.argv[1]
def term(*_):
    with open(out, "a") as f:
        f.write("term %d\n" % time.time_ns())
signal.signal(signal.SIGTERM, term)
with open(out, "a") as f:
    f.write("start %d %d\n" % (time.time_ns(), os.getpid()))
while True:
    time.sleep(0.001)
"""


def redis_cli(port, *args):
    return subprocess.run(
        ["redis-cli", "-p", str(port), *args], capture_output=True, text=True, check=True
    ).stdout


def lease_expiry_ms(port, name):
    """The lease end (server ms) of the lock's holder: the second field of its
    hold, COUNT|LEASE-END|KIND|JSON."""
    text = redis_cli(port, "HVALS", "rlock:{%s}:leases" % name)
    line = text.split("\n")[0]
    return int(line.split("|")[1]) if line.count("|") >= 3 else None


def round_once(rlock, port, ttl, holders, work, index):
    probe = os.path.join(work, "probe.py")
    with open(probe, "w") as f:
        f.write(PROBE)
    runs = []
    for i in range(holders):
        name = "margin-%d-%d" % (index, i)
        log = os.path.join(work, name + ".log")
        proc = subprocess.Popen(
            [rlock, "--url", "redis://127.0.0.1:%d" % port, "-q", "run", "--ttl", ttl,
             name, "--", sys.executable, probe, log],
            stdin=subprocess.DEVNULL,
        )
        runs.append((name, log, proc))
    pids = {}
    deadline = time.time() + 20
    while len(pids) < holders and time.time() < deadline:
        for name, log, _ in runs:
            if name not in pids and os.path.exists(log):
                words = open(log).read().split()
                if len(words) >= 3:
                    pids[name] = int(words[2])
        time.sleep(0.01)
    if len(pids) < holders:
        raise SystemExit("probes did not start")
    # Writes (scripts included) wait from here on; reads still answer, so
    # the expiries read next are the last ones any renewal could set.
    redis_cli(port, "CLIENT", "PAUSE", "120000", "WRITE")
    expiries = {name: lease_expiry_ms(port, name) for name, _, _ in runs}
    try:
        fds = {os.pidfd_open(pid): name for name, pid in pids.items()}
        deaths = {}
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        limit = time.time() + 120
        while len(deaths) < holders and time.time() < limit:
            for fd, _ in poller.poll(100):
                if fds[fd] not in deaths:
                    deaths[fds[fd]] = time.time_ns()
                    poller.unregister(fd)
    finally:
        redis_cli(port, "CLIENT", "UNPAUSE")
    results = []
    for name, log, proc in runs:
        status = proc.wait(timeout=60)
        term = None
        for line in open(log):
            if line.startswith("term "):
                term = int(line.split()[1])
                break
        end_ns = expiries[name] * 1_000_000
        results.append({
            "lock": name,
            "exit": status,
            "term_margin_ms": None if term is None else (end_ns - term) / 1e6,
            "kill_margin_ms": (end_ns - deaths[name]) / 1e6 if name in deaths else None,
        })
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rlock")
    parser.add_argument("port", type=int)
    parser.add_argument("--ttl", default="1s")
    parser.add_argument("--holders", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as work:
        for index in range(args.rounds):
            results += round_once(args.rlock, args.port, args.ttl,
                                  args.holders, work, index)
            redis_cli(args.port, "FLUSHALL")
    terms = [r["term_margin_ms"] for r in results if r["term_margin_ms"] is not None]
    kills = [r["kill_margin_ms"] for r in results if r["kill_margin_ms"] is not None]
    summary = {
        "ttl": args.ttl,
        "trials": len(results),
        "exit_70": sum(1 for r in results if r["exit"] == 70),
        "sigterm_seen": len(terms),
        "worst_sigterm_margin_ms": min(terms) if terms else None,
        "killed_seen": len(kills),
        "worst_kill_margin_ms": min(kills) if kills else None,
        "median_kill_margin_ms": sorted(kills)[len(kills) // 2] if kills else None,
    }
    print(json.dumps(summary))
    ok = (
        summary["exit_70"] == len(results)
        and len(kills) == len(results)
        and min(kills) > 0
    )
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
