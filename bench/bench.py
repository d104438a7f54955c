#!/usr/bin/env python3
"""rlock side by side with flock(1), `etcdctl lock` and a naive `redis-cli SET NX`
loop, in one run on one machine. Started by bench/run, which builds rlock and
starts the servers; the environment names them (RLOCK_BIN, REDIS_PORT,
ETCD_PORT, WORK, OUT).

Measures, for every tool:
  a. uncontended overhead of `TOOL NAME -- true` over a bare `true`;
  b. handoff gaps with 8 and 32 processes started at once, each running a ~20 ms
     job under one lock (mutual exclusion checked from the recorded intervals);
  c. rlock's Redis commands per acquisition at 8 and 32 processes;
  d. throughput: 8 processes x 20 acquisitions of `true`;
  e. the resident memory of rlock's own processes (rlock + guardian) while holding;
  f. the timeline of one run (RLOCK_TIMELINE=1): where each millisecond of
     `rlock run bench -- true` goes, from spawn to exit, Redis and file:;
  g. `list` and `list --json` with LIST_LOCKS (10,000) locks held;
  h. the common spellings of a run (`--wait 10m`, `-w 5`, `--no-wait -E 0`,
     `--ttl 30s`, RLOCK_URL set instead of --url) against the plain line, and
     any other builds named in BUILDS="label=PATH label=PATH" (an earlier
     commit, another allocator), in a, d and e, interleaved with the rest.
Writes OUT/latest.json, OUT/latest.md (the README's tables) and, with gnuplot,
OUT/handoff-gaps.png.
"""

import json
import math
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import time

RLOCK = os.environ["RLOCK_BIN"]
RLOCK_GLIBC = os.environ.get("RLOCK_GLIBC_BIN")
REDIS_PORT = os.environ["REDIS_PORT"]
ETCD_PORT = os.environ["ETCD_PORT"]
WORK = os.environ["WORK"]
OUT = os.environ["OUT"]
RUNS = int(os.environ.get("RUNS", "200"))
QUICK = os.environ.get("QUICK") == "1"
LIST_LOCKS = int(os.environ.get("LIST_LOCKS", "1000" if QUICK else "10000"))

NAIVE = (
    'until [ "$(redis-cli -p {p} set naive 1 NX PX 30000)" = OK ]; do sleep 0.01; done; '
    '"$@"; rc=$?; redis-cli -p {p} del naive >/dev/null; exit $rc'
).format(p=REDIS_PORT)

TOOLS = {
    "rlock": [RLOCK, "--url", f"redis://127.0.0.1:{REDIS_PORT}", "run", "bench", "--"],
    **({"rlock-glibc": [RLOCK_GLIBC, "--url", f"redis://127.0.0.1:{REDIS_PORT}", "run", "bench", "--"]}
       if RLOCK_GLIBC else {}),
    "rlock-local": [RLOCK, "--url", f"file:{WORK}/rlock-local", "run", "bench", "--"],
    "flock": ["flock", f"{WORK}/flock.lock"],
    "etcd": ["etcdctl", f"--endpoints=127.0.0.1:{ETCD_PORT}", "lock", "bench", "--"],
    "naive": ["sh", "-c", NAIVE, "sh"],
}
LABELS = {
    "rlock": "rlock (static, as shipped)",
    "rlock-glibc": "rlock (glibc build)",
    "rlock-local": "rlock `file:`",
    "flock": "flock",
    "etcd": "`etcdctl lock`",
    "naive": "`SET NX` + sleep 10 ms",
}
# Waiting runs print no progress lines: flock prints none either.
ENV = dict(os.environ, ETCDCTL_API="3", RLOCK_PROGRESS_INTERVAL="0")
URL = f"redis://127.0.0.1:{REDIS_PORT}"
# h. Each row: the argv before COMMAND, and the environment it runs with.
SPELLINGS = {
    "--wait 10m": ([RLOCK, "--url", URL, "run", "--wait", "10m", "bench", "--"], ENV),
    "-w 5": ([RLOCK, "--url", URL, "run", "-w", "5", "bench", "--"], ENV),
    "--no-wait -E 0": ([RLOCK, "--url", URL, "run", "--no-wait", "-E", "0", "bench", "--"], ENV),
    "--ttl 30s": ([RLOCK, "--url", URL, "run", "--ttl", "30s", "bench", "--"], ENV),
    "RLOCK_URL set": ([RLOCK, "run", "bench", "--"], dict(ENV, RLOCK_URL=URL)),
}
BUILDS = {
    f"build {label}": [path, "--url", URL, "run", "bench", "--"]
    for label, path in (b.split("=", 1) for b in os.environ.get("BUILDS", "").split())
}
# a, d, e: the tools, then the other builds (not in the handoff, timeline or list).
MEASURED = {**TOOLS, **BUILDS}
JOB = 's=$(date +%s%N); sleep 0.02; echo "$s $(date +%s%N)" >> "$LOG"'


def quantile(xs, q):
    """Nearest-rank quantile of a sorted list."""
    return xs[max(0, min(len(xs) - 1, math.ceil(q * len(xs)) - 1))]


def redis(*args):
    return subprocess.run(
        ["redis-cli", "-p", REDIS_PORT, *args], capture_output=True, text=True, check=True
    ).stdout


def round_trips():
    """Commands rlock sends (scripts run on the server are not round trips)."""
    n = 0
    for line in redis("info", "commandstats").splitlines():
        name, _, rest = line.partition(":")
        if name in ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_blpop",
                    "cmdstat_script|load", "cmdstat_rpush", "cmdstat_ping"):
            n += int(rest.split(",")[0].split("=")[1])
    return n


def overhead(res):
    """a. Each tool's `TOOL NAME -- true`, interleaved so drift hits all alike."""
    rows = {"bare": ([], ENV), **{n: (p, ENV) for n, p in MEASURED.items()}, **SPELLINGS}
    times = {name: [] for name in rows}
    for prefix, env in rows.values():
        subprocess.run(prefix + ["true"], check=True, env=env)
    order = list(rows)
    shuffle = random.Random(1)
    for _ in range(RUNS):
        # A fresh order each round: a row always run after a heavy one
        # (etcdctl) would pay for it.
        shuffle.shuffle(order)
        for name in order:
            prefix, env = rows[name]
            start = time.perf_counter()
            subprocess.run(prefix + ["true"], check=True, env=env)
            times[name].append((time.perf_counter() - start) * 1000)
    bare = statistics.median(times["bare"])
    for name in [*MEASURED, *SPELLINGS]:
        res.setdefault(name, {})
        xs = sorted(times[name])
        res[name]["overhead"] = {
            "runs": RUNS,
            "median_ms": statistics.median(xs),
            "p90_ms": quantile(xs, 0.9),
            "over_true_ms": statistics.median(xs) - bare,
        }
    res["bare_true_median_ms"] = bare


def one_round(prefix, procs, log):
    """Starts `procs` jobs at once under the tool; returns their intervals."""
    open(log, "w").close()
    env = dict(ENV, LOG=log)
    children = [subprocess.Popen(prefix + ["sh", "-c", JOB], env=env) for _ in range(procs)]
    for child in children:
        if child.wait() != 0:
            sys.exit(f"bench: a job under {prefix[0]} failed with {child.returncode}")
    with open(log, "rb") as f:
        lines = f.read().decode(errors="replace").splitlines()
    try:
        intervals = sorted(tuple(map(int, line.split())) for line in lines)
    except ValueError:
        sys.exit(f"bench: a job under {prefix[0]} wrote something other than its interval to {log}")
    if len(intervals) != procs:
        sys.exit(f"bench: {len(intervals)} of {procs} jobs ran under {prefix[0]}")
    return intervals


def handoff(res, procs, rounds):
    """b, c. The gap between one job's end and the next one's start. Rounds
    alternate between the tools, so a slow moment of the machine hits all."""
    redis("config", "resetstat")
    gaps = {name: [] for name in TOOLS}
    for r in range(rounds):
        for name, prefix in TOOLS.items():
            # A log of its own per round: a job of an earlier round that
            # outlived its tool's process (seen with `etcdctl lock` at 32
            # processes) writes into its own round's log, not this one.
            iv = one_round(prefix, procs, f"{WORK}/{name}-{procs}-{r}.log")
            for a, b in zip(iv, iv[1:]):
                if b[0] < a[1]:
                    sys.exit(f"bench: {name}: two jobs overlapped: {a} and {b}")
                gaps[name].append((b[0] - a[1]) / 1e6)
    for name in TOOLS:
        g = sorted(gaps[name])
        entry = {
            "rounds": rounds,
            "handoffs": len(g),
            "median_ms": statistics.median(g),
            "p90_ms": quantile(g, 0.9),
            "p99_ms": quantile(g, 0.99),
            "max_ms": g[-1],
            "gaps_ms": [round(x, 3) for x in g],
        }
        if name == "rlock":
            # Only rlock sends these commands (the naive loop's SET and DEL are
            # not counted), from both of its builds when both are measured.
            builds = 2 if "rlock-glibc" in TOOLS else 1
            entry["redis_commands_per_acquisition"] = round_trips() / (rounds * procs * builds)
        res[name][f"handoff_{procs}"] = entry


def throughput(res, repeats=3):
    """d. 8 processes x 20 acquisitions of `true`, acquisitions per second;
    the median of `repeats` runs, alternating between the tools."""
    rates = {name: [] for name in MEASURED}
    loop = 'for i in $(seq 20); do "$@" true || exit 1; done'
    for _ in range(repeats):
        for name, prefix in MEASURED.items():
            start = time.perf_counter()
            children = [subprocess.Popen(["sh", "-c", loop, "sh", *prefix], env=ENV) for _ in range(8)]
            if any(c.wait() != 0 for c in children):
                sys.exit(f"bench: throughput run of {name} failed")
            rates[name].append(160 / (time.perf_counter() - start))
    for name in MEASURED:
        res[name]["throughput_per_s"] = statistics.median(rates[name])


def rss_kib(pid):
    """VmRSS and VmHWM of one process, KiB."""
    with open(f"/proc/{pid}/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def memory(res):
    """e. The resident set of rlock's own processes (rlock and its guardian,
    summed; not COMMAND) while it holds a lock and COMMAND sleeps."""
    for name in ("rlock", "rlock-glibc", *BUILDS):
        if name not in MEASURED:
            continue
        holder = subprocess.Popen(MEASURED[name] + ["sleep", "2"])
        deadline = time.monotonic() + 5
        while redis("exists", "rlock:{bench}:leases").strip() != "1":
            if time.monotonic() > deadline:
                sys.exit("bench: rlock did not take the lock for the memory sample")
            time.sleep(0.01)
        time.sleep(0.2)
        # The guardian is forked, not exec'd: a child with rlock's own name.
        ours = [holder.pid]
        with open(f"/proc/{holder.pid}/comm") as c:
            comm = c.read().strip()
        for task in os.listdir(f"/proc/{holder.pid}/task"):
            with open(f"/proc/{holder.pid}/task/{task}/children") as f:
                for child in f.read().split():
                    with open(f"/proc/{child}/comm") as c:
                        if c.read().strip() == comm:
                            ours.append(int(child))
        samples = [rss_kib(pid) for pid in ours]
        holder.wait()
        # The next holder's check above must not see this one's lease.
        redis("del", "rlock:{bench}:leases")
        res[name]["processes"] = len(ours)
        res[name]["rss_kib"] = sum(s[0] for s in samples)
        res[name]["rss_peak_kib"] = sum(s[1] for s in samples)
        res[name]["rss_main_kib"] = samples[0][0]


STEPS = {
    "main": "main() entered (exec, dynamic start-up)",
    "guardian": "guardian forked",
    "parsed": "command line parsed",
    "connected": "connected (file: the lock directory opened)",
    "acquired": "acquire reply (file: the flock and the records)",
    "started": "COMMAND exec'd",
    "exited": "COMMAND reaped",
    "released": "release reply",
    "done": "run finished (what is left: exit)",
    "gone": "rlock's process gone (wait returned)",
}


def timeline(res, runs):
    """f. RLOCK_TIMELINE=1 marks each step on CLOCK_BOOTTIME; read before the
    spawn and after the wait on the same clock, they give µs since spawn.
    The median of each step over `runs` runs, Redis, file:, a bare `true` and
    flock interleaved (each spawned the same way, so the medians compare)."""
    clock = time.CLOCK_BOOTTIME
    env = dict(ENV, RLOCK_TIMELINE="1")
    names = ("rlock", "rlock-local", "bare", "flock")
    offsets = {name: {} for name in names}
    for _ in range(runs):
        for name in names:
            argv = TOOLS.get(name, []) + ["true"]
            start = time.clock_gettime_ns(clock)
            out = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 text=True, check=True)
            gone = time.clock_gettime_ns(clock)
            marks = {"gone": gone}
            for line in out.stderr.splitlines():
                if line.startswith("rlock: timeline: "):
                    marks.update(kv.split("=") for kv in line.split(": ", 2)[2].split())
            for step, at in marks.items():
                offsets[name].setdefault(step, []).append((int(at) - start) / 1000)
    for name in names:
        res.setdefault(name, {})["timeline_us"] = {
            s: statistics.median(v) for s, v in offsets[name].items()}


def list_many(res):
    """g. LIST_LOCKS locks held (taken by `rlock acquire`, 8 at a time), then
    `list` and `list --json`, three times each (the median)."""
    url = ["--url", f"redis://127.0.0.1:{REDIS_PORT}"]
    names = "\n".join(f"many-{i}" for i in range(LIST_LOCKS)) + "\n"
    subprocess.run(["xargs", "-P", "8", "-n", "1", RLOCK, *url, "acquire", "--ttl", "1h"],
                   input=names, text=True, capture_output=True, check=True, env=ENV)
    for args in (["list"], ["list", "--json"]):
        times = []
        for _ in range(3):
            start = time.perf_counter()
            out = subprocess.run([RLOCK, *url, *args, "many-*"], capture_output=True, text=True,
                                 check=True, env=ENV)
            times.append(time.perf_counter() - start)
            if out.stdout.count("many-") < LIST_LOCKS:
                sys.exit(f"bench: {' '.join(args)} showed fewer than {LIST_LOCKS} locks")
        res["rlock"]["_".join(a.strip("-") for a in args) + "_s"] = statistics.median(times)
    res["rlock"]["list_locks"] = LIST_LOCKS
    redis("flushall")


def versions():
    def first_line(cmd):
        try:
            out = subprocess.run(cmd, capture_output=True, text=True).stdout
            return out.splitlines()[0] if out else "?"
        except OSError:
            return "?"
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "rlock_commit": rev or "?",
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "redis": first_line(["redis-server", "--version"]),
        "etcd": first_line(["etcd", "--version"]),
        "flock": first_line(["flock", "--version"]),
    }


def targets(res):
    r, f = res["rlock"], res["flock"]
    c8 = r["handoff_8"]["redis_commands_per_acquisition"]
    c32 = r["handoff_32"]["redis_commands_per_acquisition"]
    over = r["overhead"]["over_true_ms"] / f["overhead"]["over_true_ms"]
    local = res["rlock-local"]["overhead"]["over_true_ms"] / f["overhead"]["over_true_ms"]
    return [
        ("overhead vs flock", "<= 1.5x", f"{over:.2f}x", over <= 1.5),
        ("`file:` overhead vs flock", "<= 1.5x", f"{local:.2f}x", local <= 1.5),
        *[
            (f"handoff median vs flock, {n} processes", "<= 1.5x",
             f"{r[f'handoff_{n}']['median_ms'] / f[f'handoff_{n}']['median_ms']:.2f}x",
             r[f"handoff_{n}"]["median_ms"] <= 1.5 * f[f"handoff_{n}"]["median_ms"])
            for n in (8, 32)
        ],
        ("handoff p99, 32 processes", "<= 5 ms", f"{r['handoff_32']['p99_ms']:.2f} ms",
         r["handoff_32"]["p99_ms"] <= 5),
        ("Redis commands per acquisition, 8 / 32", "<= 6, same at both",
         f"{c8:.2f} / {c32:.2f}", max(c8, c32) <= 6 and abs(c8 - c32) <= 0.5),
        ("throughput vs flock", ">= 0.75x",
         f"{r['throughput_per_s'] / f['throughput_per_s']:.2f}x",
         r["throughput_per_s"] >= 0.75 * f["throughput_per_s"]),
        ("resident memory while holding (rlock + guardian)", "<= 3 MiB",
         f"{r['rss_kib'] / 1024:.2f} MiB", r["rss_kib"] <= 3072),
        *[
            (f"`{name}` overhead vs the plain line", "<= 1.10x",
             f"{res[name]['overhead']['over_true_ms'] / r['overhead']['over_true_ms']:.2f}x",
             res[name]["overhead"]["over_true_ms"] <= 1.10 * r["overhead"]["over_true_ms"])
            for name in SPELLINGS
        ],
        *[
            (f"overhead vs {name}", "<= 1.10x",
             f"{r['overhead']['over_true_ms'] / res[name]['overhead']['over_true_ms']:.2f}x",
             r["overhead"]["over_true_ms"] <= 1.10 * res[name]["overhead"]["over_true_ms"])
            for name in BUILDS
        ],
        (f"`list` / `list --json` of {r['list_locks']:,} held locks", "<= 1 s",
         f"{r['list_s']:.2f} / {r['list_json_s']:.2f} s", max(r["list_s"], r["list_json_s"]) <= 1),
    ]


def markdown(res):
    v = res["machine"]
    lines = [
        f"Run {v['date']} at {v['rlock_commit']}: {v['cores']} cores, Linux {v['kernel']}, "
        f"{v['redis'].split(' sha=')[0]}, {v['etcd']}. \"rlock\" is the static musl release "
        "binary that scripts/dist ships; the glibc build of the same code is the second row.",
        "",
        "| tool | overhead over `true` (median / p90 of total) | vs flock | "
        "handoff 8 procs: median / p99 / max | handoff 32 procs: median / p99 / max | "
        "vs flock (32) | throughput | vs flock |",
        "|---|---|---|---|---|---|---|---|",
    ]
    f = res["flock"]
    for name in TOOLS:
        r = res[name]
        o = r["overhead"]
        h8, h32 = r["handoff_8"], r["handoff_32"]
        lines.append(
            f"| {LABELS[name]} | {o['over_true_ms']:.2f} ms ({o['median_ms']:.2f} / {o['p90_ms']:.2f}) "
            f"| {o['over_true_ms'] / f['overhead']['over_true_ms']:.2f} "
            f"| {h8['median_ms']:.2f} / {h8['p99_ms']:.2f} / {h8['max_ms']:.2f} ms "
            f"| {h32['median_ms']:.2f} / {h32['p99_ms']:.2f} / {h32['max_ms']:.2f} ms "
            f"| {h32['median_ms'] / f['handoff_32']['median_ms']:.2f} "
            f"| {r['throughput_per_s']:.0f}/s | {r['throughput_per_s'] / f['throughput_per_s']:.2f} |"
        )
    lines += ["", "Where the time of one `rlock run bench -- true` goes (RLOCK_TIMELINE=1, the median "
              "of each step, µs since spawn, in runs interleaved with a bare `true`, which took "
              f"{res['bare']['timeline_us']['gone']:,.0f} µs in all, and `flock NAME true`, "
              f"{res['flock']['timeline_us']['gone']:,.0f} µs):", "",
              "| step | Redis: µs since spawn | Redis: this step | `file:`: µs since spawn | `file:`: this step |",
              "|---|---|---|---|---|"]
    prev = {"rlock": 0.0, "rlock-local": 0.0}
    for step, what in STEPS.items():
        cells = []
        for name in ("rlock", "rlock-local"):
            at = res[name]["timeline_us"].get(step)
            if at is None:
                cells += ["", ""]
                continue
            cells += [f"{at:,.0f}", f"{at - prev[name]:,.0f}"]
            prev[name] = at
        lines.append(f"| {what} | " + " | ".join(cells) + " |")
    lines += compared(res)
    lines += ["", "| target | goal | measured | met |", "|---|---|---|---|"]
    for what, goal, got, met in res["targets"]:
        lines.append(f"| {what} | {goal} | {got} | {'yes' if met else '**no**'} |")
    return "\n".join(lines) + "\n"


def compared(res):
    """h. The spellings and other builds beside the plain line, in the same rounds."""
    plain = res["rlock"]["overhead"]["over_true_ms"]
    lines = ["", "The plain line beside its common spellings and the other builds (BUILDS), "
             "interleaved in the same rounds:", "",
             "| run | overhead over `true` (median / p90 of total) | vs the plain line | "
             "throughput | vs flock | resident memory while holding |",
             "|---|---|---|---|---|---|"]
    for name in ["rlock", *SPELLINGS, *BUILDS]:
        r = res[name]
        o = r["overhead"]
        tput = (f"{r['throughput_per_s']:.0f}/s | "
                f"{r['throughput_per_s'] / res['flock']['throughput_per_s']:.2f}"
                if "throughput_per_s" in r else " | ")
        rss = f"{r['rss_kib'] / 1024:.2f} MiB" if "rss_kib" in r else ""
        label = LABELS.get(name, f"`{name}`" if name in SPELLINGS else name)
        lines.append(f"| {label} | {o['over_true_ms']:.2f} ms ({o['median_ms']:.2f} / "
                     f"{o['p90_ms']:.2f}) | {o['over_true_ms'] / plain:.2f} | {tput} | {rss} |")
    return lines


def plot(res):
    """Cumulative distribution of the handoff gaps per tool, 8 and 32 processes."""
    if not shutil.which("gnuplot"):
        print("bench: gnuplot not found; no plot")
        return
    for name in TOOLS:
        for n in (8, 32):
            gaps = res[name][f"handoff_{n}"]["gaps_ms"]
            with open(f"{WORK}/{name}-{n}.dat", "w") as f:
                for i, g in enumerate(gaps):
                    f.write(f"{max(g, 0.01)} {(i + 1) / len(gaps)}\n")
    panels = []
    for n in (8, 32):
        series = ", ".join(
            f"'{WORK}/{name}-{n}.dat' using 1:2 with steps lw 2 title '{name}'" for name in TOOLS
        )
        panels.append(f"set title '{n} processes'\nplot {series}")
    script = "\n".join([
        f"set terminal pngcairo size 1100,420 font ',10'" if "pngcairo" in terminals() else "set terminal png size 1100,420",
        f"set output '{OUT}/handoff-gaps.png'",
        "set multiplot layout 1,2 title 'Handoff gap: one job ends -> the next starts (CDF)'",
        "set logscale x", "set xlabel 'gap (ms, log scale)'", "set ylabel 'fraction of handoffs'",
        "set key bottom right", "set grid", "set yrange [0:1]",
        *panels,
        "unset multiplot",
    ])
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


def terminals():
    return subprocess.run(["gnuplot", "-e", "set terminal"], capture_output=True, text=True).stderr


def main():
    res = {name: {} for name in TOOLS}
    res["machine"] = versions()
    rounds8, rounds32 = (2, 1) if QUICK else (15, 4)
    print(f"a. overhead: {RUNS} runs of each tool", flush=True)
    overhead(res)
    print(f"b. handoff: 8 processes x {rounds8} rounds, 32 processes x {rounds32} rounds", flush=True)
    handoff(res, 8, rounds8)
    handoff(res, 32, rounds32)
    # 11 rounds: with 5, the ratio to flock moved 0.73-0.81 between runs of
    # one build on a shared 2-core machine.
    print("d. throughput: 8 processes x 20 acquisitions, 11 times", flush=True)
    throughput(res, 1 if QUICK else 11)
    memory(res)
    print(f"f. timeline of one run: {RUNS // 4} runs each", flush=True)
    timeline(res, max(RUNS // 4, 5))
    print(f"g. list of {LIST_LOCKS} held locks", flush=True)
    list_many(res)
    res["targets"] = targets(res)
    os.makedirs(OUT, exist_ok=True)
    with open(f"{OUT}/latest.json", "w") as f:
        json.dump(res, f, indent=1)
    table = markdown(res)
    with open(f"{OUT}/latest.md", "w") as f:
        f.write(table)
    plot(res)
    print()
    print(table)
    for n in (8, 32):
        print(f"rlock Redis commands per acquisition, {n} processes: "
              f"{res['rlock'][f'handoff_{n}']['redis_commands_per_acquisition']:.2f}")
    for name in ("rlock", "rlock-glibc", *BUILDS):
        if "rss_kib" in res.get(name, {}):
            r = res[name]
            print(f"{LABELS.get(name, name)} resident memory while holding: {r['rss_kib'] / 1024:.2f} MiB "
                  f"in {r['processes']} processes (rlock alone {r['rss_main_kib'] / 1024:.2f} MiB; "
                  f"peak {r['rss_peak_kib'] / 1024:.2f} MiB)")
    print("mutual exclusion verified from the recorded intervals for every tool")
    print(f"written: {OUT}/latest.json, {OUT}/latest.md" +
          (f", {OUT}/handoff-gaps.png" if shutil.which("gnuplot") else ""))


if __name__ == "__main__":
    main()
