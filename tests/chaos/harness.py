#!/usr/bin/env python3
"""Chaos harness for `rlock run`: many workers per lock, random holds, random
faults, then a check of what the locks' holders actually did. Started by
tests/chaos/run (which explains every figure); it can also run on its own:

    python3 tests/chaos/harness.py [--rlock BIN] [--duration S] [--workers N] [--locks K] ...
    python3 tests/chaos/harness.py --topology sentinel|cluster ...

Python 3 standard library only; needs Linux (pidfds), redis-server (or another
server binary: --server), redis-cli for --topology cluster, and cc.
"""

import argparse
import json
import os
import random
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

from analysis import analyse, print_report, status_name
from resp import RedisError, redis_call
from topology import TOPOLOGIES

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
# COMMAND under the lock (its header says what it logs).
PROBE_SOURCE = os.path.join(HERE, "probe.c")

FAULT_KINDS = [
    "redis-stop",          # SIGSTOP redis-server, SIGCONT after 0.2-2 s
    "redis-restart-aof",   # SIGKILL redis-server, restart on its AOF (data kept)
    "redis-restart-lose",  # SIGKILL redis-server, restart with its data removed
    "client-pause",        # CLIENT PAUSE 200-2000 ms ALL
    "debug-sleep",         # DEBUG SLEEP 0.2-2 s
    "holder-kill",         # SIGKILL of a holding rlock
    "holder-stop",         # SIGSTOP of a holding rlock for 1.5-3 ttl, then SIGCONT
    "force-release",       # rlock release --force LOCK
]
# Faults of one topology only (topology.py carries them out).
TOPOLOGY_FAULTS = {
    "sentinel-failover": "sentinel",   # SENTINEL FAILOVER mymaster on a sentinel
    "slot-migration": "cluster",       # a held lock's slot moved to another master
    "cluster-failover": "cluster",     # CLUSTER FAILOVER on a random master's replica
}
ALL_KINDS = FAULT_KINDS + list(TOPOLOGY_FAULTS)

ORPHAN_GRACE_MS = 250   # a probe still alive this long after its rlock exited is an orphan
SETTLE_MARGIN_S = 2.0   # waited on top of the ttl before looking for keys left



def mono():
    return time.monotonic_ns()


def parse_ms(text):
    """'1s', '500ms', '2m' -> milliseconds (the subset of humantime used here)."""
    m = re.fullmatch(r"\s*(\d+)\s*(ms|s|m)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"bad duration {text!r} (use e.g. 500ms, 1s)")
    return int(m.group(1)) * {"ms": 1, "s": 1000, "m": 60000}[m.group(2)]


def parse_range(text):
    m = re.fullmatch(r"\s*([0-9.]+)\s*[-,]\s*([0-9.]+)\s*", text)
    if not m or float(m.group(1)) <= 0 or float(m.group(1)) > float(m.group(2)):
        raise argparse.ArgumentTypeError(f"bad range {text!r} (use MIN-MAX seconds, e.g. 1-2)")
    return float(m.group(1)), float(m.group(2))


def topology_kinds(topology):
    """Every fault kind TOPOLOGY can take ('all'), and its default list."""
    cls = TOPOLOGIES[topology]
    every = [k for k in ALL_KINDS if TOPOLOGY_FAULTS.get(k, topology) == topology]
    return every, [k for k in every if k not in cls.default_excluded]


def parse_kinds(text):
    if text in ("all", "none"):
        return text
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    bad = [k for k in kinds if k not in ALL_KINDS]
    if bad:
        raise argparse.ArgumentTypeError(
            f"unknown fault kind(s) {', '.join(bad)}; known: {', '.join(ALL_KINDS)}")
    return kinds


# --- a minimal RESP client (no redis-cli processes, no dependencies) --------

def probe_argv_matches(pid, run_id):
    """Whether PID is (still) the probe of RUN_ID, not a zombie or a reused pid."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return False
    return len(argv) > 2 and argv[2] == run_id.encode()


def in_session(sid):
    """Pids of live processes in session SID (zombies excluded)."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 3 and fields[0] != b"Z" and int(fields[3]) == sid:
            pids.append(pid)
    return pids


def exe_of(pid):
    """The binary PID runs, or None (gone, a zombie: its exe link reads
    ENOENT, which os.path.realpath raises between its lstat and readlink)."""
    try:
        return os.path.realpath(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return None


class Run:
    def __init__(self, run_id, lock, worker):
        self.id = run_id
        self.lock = lock
        self.worker = worker
        self.hold_ms = self.grace_ms = self.wait_ms = 0
        self.t_launch = self.t_exit = None
        self.deadline = None
        self.pid = None
        self.pidfd = None
        self.status = None
        self.exited = False
        self.closed = False
        self.probe_pid = None
        self.probe_fd = None
        self.t_probe_dead = None
        self.orphan = False
        self.hung = False
        self.stopped = False
        self.faults = []
        self.stderr = ""

    def holding(self):
        return (self.probe_fd is not None and not self.exited and not self.stopped
                and not self.closed)


class Harness:
    def __init__(self, args, rlock, work, out):
        self.args = args
        self.rlock = rlock
        self.work = work
        self.out = out
        self.ttl_ms = args.ttl
        self.ka_ms = args.kill_after
        self.topo = TOPOLOGIES[args.topology](args.server, work, out)
        self.server = self.topo.server  # the one server (single), else the first node
        self.port = self.topo.port
        self.url = self.topo.url
        self.monitor_stop = threading.Event()
        self.monitor_thread = None
        self.locks = [f"chaos-{i}" for i in range(args.locks)]
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.active = {}
        self.runs = []
        self.faults = []
        self.undo = []          # (due ns, fn): injector thread only (then main)
        self.fault_threads = []
        self.injector_thread = None
        self.strays = []
        self.errors = []
        self.keys_left_found = []
        self.t0 = mono()
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("RLOCK_") and k not in ("REDIS_URL", "REDISCLI_AUTH")}
        self.runs_file = open(os.path.join(out, "runs.jsonl"), "w")
        self.faults_file = open(os.path.join(out, "faults.jsonl"), "w")
        self.probe = os.path.join(work, "chaos_probe")

    def rel(self, ns):
        return None if ns is None else round((ns - self.t0) / 1e6, 3)

    def say(self, text):
        if self.args.verbose:
            print(f"[{(mono() - self.t0) / 1e9:7.2f}s] {text}", flush=True)

    def build_probe(self):
        subprocess.run(["cc", "-O2", "-Wall", "-o", self.probe, PROBE_SOURCE], check=True)

    # --- workers ---------------------------------------------------------

    def worker(self, lock, index):
        rng = random.Random(f"{self.args.seed}/{lock}/{index}")
        log = os.path.join(self.out, f"probe-{lock}-{index}.log")
        open(log, "ab").close()
        with open(os.path.join(self.out, f"rlock-{lock}-{index}.stderr"), "ab") as errf:
            n = 0
            while not self.stopping.is_set():
                n += 1
                run = Run(f"{lock}.{index}.{n}", lock, index)
                self.choose(run, rng)
                try:
                    self.one_run(run, log, errf)
                except Exception as e:  # a harness bug must not hang the run
                    print(f"chaos: worker {lock}/{index}: {e!r}", file=sys.stderr)
                    with self.lock:
                        self.errors.append({"run": run.id, "error": traceback.format_exc()})
                        # Not followed any more: no fault may pick it.
                        self.active.pop(run.id, None)
                        if run.pidfd is not None and not run.closed:
                            run.closed = True
                            os.close(run.pidfd)
                    self.stopping.wait(0.5)
                self.stopping.wait(rng.uniform(0.01, 0.05))

    def choose(self, run, rng):
        ttl = self.ttl_ms
        r = rng.random()
        if r < 0.45:        # well inside one lease
            run.hold_ms = rng.randint(5, max(6, ttl // 2))
        elif r < 0.70:      # around one lease: the first renewals
            run.hold_ms = rng.randint(ttl // 2, ttl * 3 // 2)
        else:               # several leases: renewals matter
            run.hold_ms = rng.randint(2 * ttl, 4 * ttl)
        # Some probes take longer than --kill-after to shut down on SIGTERM.
        run.grace_ms = 0 if rng.random() < 0.7 else rng.randint(
            int(self.ka_ms * 1.5), int(self.ka_ms * 2.5))
        run.wait_ms = rng.randint(500, 6000)

    def find_probe(self, run, log, offset):
        if run.probe_pid is not None:
            return
        try:
            with open(log, "rb") as f:
                f.seek(offset)
                data = f.read()
        except OSError:
            return
        tag = b"start " + run.id.encode() + b" "
        for line in data.split(b"\n"):
            if line.startswith(tag):
                run.probe_pid = int(line.split()[3])
                try:
                    fd = os.pidfd_open(run.probe_pid)
                except ProcessLookupError:
                    return
                if probe_argv_matches(run.probe_pid, run.id):
                    run.probe_fd = fd
                else:
                    os.close(fd)
                return

    def one_run(self, run, log, errf):
        argv = [self.rlock, "--url", self.url, *self.args.rlock_arg, "run",
                "--ttl", f"{self.ttl_ms}ms",
                "--wait", f"{run.wait_ms}ms", "--kill-after", f"{self.ka_ms}ms", run.lock,
                "--", self.probe, log, run.id, str(run.hold_ms), str(run.grace_ms)]
        log_off = os.path.getsize(log)
        err_off = os.fstat(errf.fileno()).st_size
        budget_ms = (run.wait_ms + run.hold_ms + self.ttl_ms + self.ka_ms
                     + self.args.hung_margin * 1000)
        run.t_launch = mono()
        run.wall = time.time()
        run.deadline = run.t_launch + int(budget_ms * 1e6)
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=errf, env=self.env, start_new_session=True)
        run.pid = proc.pid
        run.pidfd = os.pidfd_open(proc.pid)
        with self.lock:
            self.active[run.id] = run
        poller = select.poll()
        poller.register(run.pidfd, select.POLLIN)
        while True:
            now = mono()
            left_ms = max(0, (run.deadline - now) // 1_000_000 + 1)
            timeout = 50 if run.hung else min(left_ms, 50 if run.probe_pid is None else 1000)
            events = poller.poll(timeout)
            now = mono()
            exited = False
            for fd, _ in events:
                if fd == run.pidfd:
                    exited = True
                elif fd == run.probe_fd:
                    run.t_probe_dead = now
                    poller.unregister(fd)
                    self.close_probe_fd(run)
            if exited:
                run.t_exit = now
                break
            if run.probe_pid is None:
                self.find_probe(run, log, log_off)
                if run.probe_fd is not None:
                    poller.register(run.probe_fd, select.POLLIN)
            if now > run.deadline and not run.hung:
                run.hung = True
                self.say(f"hung: {run.id} (pid {run.pid}) killed")
                self.send(run, signal.SIGKILL)
        proc.wait()
        run.status = proc.returncode
        run.exited = True
        if run.probe_pid is None:
            self.find_probe(run, log, log_off)
        if run.probe_fd is not None:
            self.reap_probe(run)
        with self.lock:
            self.active.pop(run.id, None)
            run.closed = True
            os.close(run.pidfd)
        if run.status < 0:
            self.await_guardian(run)
        errf.flush()
        with open(errf.name, "rb") as f:
            f.seek(err_off)
            run.stderr = f.read().decode(errors="replace").strip()
        self.record_run(run)

    def await_guardian(self, run):
        """A killed rlock's guardian releases its holds and may say on the
        run's stderr that one was already lost: wait for it (an rlock process
        left in the run's session) so that its lines are read with the run's."""
        exe = os.path.realpath(self.rlock)
        deadline = mono() + int((self.ka_ms + 30_000) * 1e6)
        while mono() < deadline:
            if not any(exe_of(pid) == exe for pid in in_session(run.pid)):
                return
            time.sleep(0.02)

    def close_probe_fd(self, run):
        with self.lock:
            fd, run.probe_fd = run.probe_fd, None
        if fd is not None:
            os.close(fd)

    def reap_probe(self, run):
        """rlock exited while its probe lived: the probe must die at once."""
        p = select.poll()
        p.register(run.probe_fd, select.POLLIN)
        if p.poll(ORPHAN_GRACE_MS):
            run.t_probe_dead = mono()
        else:
            run.orphan = True
            self.say(f"orphan: probe {run.probe_pid} of {run.id} outlived its rlock; killed")
            signal.pidfd_send_signal(run.probe_fd, signal.SIGKILL)
            p.poll(5000)
            run.t_probe_dead = mono()
        self.close_probe_fd(run)

    def send(self, run, sig):
        """Signals a run's rlock through its pidfd (never a reused pid)."""
        with self.lock:
            if run.closed:
                return False
            try:
                signal.pidfd_send_signal(run.pidfd, sig)
                return True
            except ProcessLookupError:
                return False

    def record_run(self, run):
        rec = {
            "id": run.id, "lock": run.lock, "hold_ms": run.hold_ms, "grace_ms": run.grace_ms,
            "wait_ms": run.wait_ms, "launch_ms": self.rel(run.t_launch),
            "exit_ms": self.rel(run.t_exit), "wall": run.wall, "pid": run.pid,
            "status": status_name(run.status), "probe_pid": run.probe_pid,
            "probe_dead_ms": self.rel(run.t_probe_dead), "orphan": run.orphan,
            "hung": run.hung, "faults": run.faults, "stderr": run.stderr,
        }
        with self.lock:
            self.runs.append(run)
            self.runs_file.write(json.dumps(rec) + "\n")

    # --- faults ----------------------------------------------------------

    def injector(self):
        rng = random.Random(f"{self.args.seed}/faults")
        lo, hi = self.args.fault_interval
        kinds = self.args.faults
        next_at = mono() + int(rng.uniform(lo, hi) * 1e9)
        while not self.stopping.is_set():
            self.run_undo(mono())
            if kinds and mono() >= next_at:
                kind = rng.choice(kinds)
                try:
                    self.inject(kind, rng)
                except Exception as e:
                    self.add_fault(kind, mono(), mono(), error=repr(e))
                next_at = mono() + int(rng.uniform(lo, hi) * 1e9)
            due = [t for t, _ in self.undo] + ([next_at] if kinds else [])
            wait = (min(due) - mono()) / 1e9 if due else 0.1
            self.stopping.wait(min(max(wait, 0.0), 0.1))
        self.run_undo(None)

    def run_undo(self, now):
        keep = []
        for due, fn in self.undo:
            if now is None or due <= now:
                try:
                    fn()
                except Exception as e:
                    print(f"chaos: undoing a fault: {e!r}", file=sys.stderr)
            else:
                keep.append((due, fn))
        self.undo = keep

    def add_fault(self, kind, t_begin, t_end, **detail):
        rec = {"kind": kind, "t_ns": t_begin, "end_ns": t_end, **detail}
        with self.lock:
            self.faults.append(rec)
            out = {"kind": kind, "at_ms": self.rel(t_begin), "end_ms": self.rel(t_end),
                   "wall": time.time(), **detail}
            self.faults_file.write(json.dumps(out) + "\n")
            self.faults_file.flush()
        self.say(f"fault {kind} {json.dumps(detail)}")
        return rec

    def log_fault_end(self, rec):
        """A fault whose end came later (a failover, a slot migration): its
        faults.jsonl line again, with "phase": "end" and its end."""
        detail = {k: v for k, v in rec.items() if k not in ("kind", "t_ns", "end_ns")}
        with self.lock:
            out = {"kind": rec["kind"], "phase": "end", "at_ms": self.rel(rec["t_ns"]),
                   "end_ms": self.rel(rec["end_ns"]), "wall": time.time(), **detail}
            self.faults_file.write(json.dumps(out) + "\n")
            self.faults_file.flush()
        self.say(f"fault {rec['kind']} ended {json.dumps(detail)}")

    def holders(self):
        with self.lock:
            return [r for r in self.active.values() if r.holding()]

    def background(self, fn):
        t = threading.Thread(target=fn, daemon=True)
        t.start()
        self.fault_threads.append(t)

    def inject(self, kind, rng):
        now = mono()
        topo = self.topo
        if kind == "redis-stop":
            node = topo.fault_node(rng)  # the server; the master now; a random master
            d = rng.uniform(0.2, 2.0)
            gen = node.gen
            node.signal(signal.SIGSTOP, gen)
            rec = self.add_fault(kind, now, now + int(d * 1e9), stop_ms=round(d * 1000),
                                 **topo.node_detail(node))

            def cont():
                node.signal(signal.SIGCONT, gen)
                rec["end_ns"] = mono()
            self.undo.append((now + int(d * 1e9), cont))
        elif kind in ("redis-restart-aof", "redis-restart-lose"):
            blocked = topo.restart_blocked and topo.restart_blocked()
            if blocked:
                self.add_fault(kind, now, now, skipped=blocked)
                return
            node = topo.fault_node(rng)
            with node.lock:
                t_kill = topo.restart(node, wipe=kind == "redis-restart-lose")
            t_up = mono()
            self.add_fault(kind, t_kill, t_up, down_ms=round((t_up - t_kill) / 1e6, 1),
                           **topo.node_detail(node))
        elif kind == "client-pause":
            node = topo.fault_node(rng)
            ms = rng.randint(200, 2000)
            rec = self.add_fault(kind, now, now + ms * 1_000_000, pause_ms=ms,
                                 **topo.node_detail(node))

            def pause():
                try:
                    redis_call(node.port, "CLIENT", "PAUSE", ms, "ALL", timeout=10)
                except RedisError:  # before Redis 6.2: no ALL/WRITE argument
                    redis_call(node.port, "CLIENT", "PAUSE", ms, timeout=10)
                except (OSError, ConnectionError) as e:
                    rec["error"] = repr(e)
            self.background(pause)
        elif kind == "debug-sleep":
            node = topo.fault_node(rng)
            s = rng.uniform(0.2, 2.0)
            rec = self.add_fault(kind, now, now + int(s * 1e9), sleep_ms=round(s * 1000),
                                 **topo.node_detail(node))

            def sleep():
                try:
                    redis_call(node.port, "DEBUG", "SLEEP", f"{s:.3f}", timeout=s + 10)
                except (OSError, ConnectionError, RedisError) as e:
                    rec["error"] = repr(e)
                rec["end_ns"] = mono()
            self.background(sleep)
        elif kind == "sentinel-failover":
            topo.sentinel_failover(self, rng)
        elif kind == "slot-migration":
            cands = self.holders()
            lock = rng.choice(cands).lock if cands else rng.choice(self.locks)
            topo.slot_migration(self, rng, lock)
        elif kind == "cluster-failover":
            topo.cluster_failover(self, rng)
        elif kind == "holder-kill":
            cands = self.holders()
            if not cands:
                self.add_fault(kind, now, now, skipped="no holder")
                return
            run = rng.choice(cands)
            if self.send(run, signal.SIGKILL):
                run.faults.append(kind)
                self.add_fault(kind, now, now, run=run.id, lock=run.lock, pid=run.pid)
        elif kind == "holder-stop":
            cands = self.holders()
            if not cands:
                self.add_fault(kind, now, now, skipped="no holder")
                return
            run = rng.choice(cands)
            d = rng.uniform(1.5, 3.0) * self.ttl_ms / 1000
            if not self.send(run, signal.SIGSTOP):
                return
            run.stopped = True
            run.faults.append(kind)
            run.deadline += int(d * 1e9)
            rec = self.add_fault(kind, now, now + int(d * 1e9), run=run.id, lock=run.lock,
                                 pid=run.pid, stop_ms=round(d * 1000))

            def cont():
                self.send(run, signal.SIGCONT)
                run.stopped = False
                rec["end_ns"] = mono()
            self.undo.append((now + int(d * 1e9), cont))
        elif kind == "force-release":
            cands = self.holders()
            lock = rng.choice(cands).lock if cands else rng.choice(self.locks)
            p = subprocess.run([self.rlock, "--url", self.url, "release", "--force", lock],
                               stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               env=self.env, timeout=15)
            self.add_fault(kind, now, mono(), lock=lock, status=p.returncode,
                           stderr=p.stderr.strip())

    # --- the end ----------------------------------------------------------

    def sweep(self, record=True):
        """Probes alive after everything ended (orphans not seen at their run's
        exit), and rlock processes (or their guardians) still running."""
        found = []
        starts = {}
        for name in os.listdir(self.out):
            if name.startswith("probe-") and name.endswith(".log"):
                for line in open(os.path.join(self.out, name), "rb"):
                    parts = line.split()
                    if len(parts) >= 4 and parts[0] == b"start":
                        starts[parts[1].decode()] = int(parts[3])
        counted = {r.id for r in self.runs if r.orphan}
        for run_id, pid in starts.items():
            if run_id in counted:
                continue
            try:
                fd = os.pidfd_open(pid)
            except (ProcessLookupError, FileNotFoundError):
                # Gone (newer kernels say ENOENT for a pid that just exited).
                continue
            try:
                if probe_argv_matches(pid, run_id):
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
                    found.append(run_id)
            finally:
                os.close(fd)
        if record:
            for run in self.runs:
                if run.id in found:
                    run.orphan = True
                    run.t_probe_dead = mono()  # its section ends no earlier than now
        # rlock processes (a run, or its forked guardian) still alive: everything
        # ended, so none should be.
        me, exe = self.url.encode(), os.path.realpath(self.rlock)
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                fd = os.pidfd_open(int(pid))
            except OSError:
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
                if me in argv and os.path.realpath(argv[0].decode(errors="replace")) == exe:
                    signal.pidfd_send_signal(fd, signal.SIGCONT)
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
                    if record:
                        self.strays.append({"pid": int(pid), "argv": [
                            a.decode(errors="replace") for a in argv if a]})
            except OSError:
                pass
            finally:
                os.close(fd)
        return found

    def keys_left(self):
        """Keys left on the server (on the master now; on every master)."""
        left = []
        nodes = self.topo.sweep_nodes()
        for node in nodes:
            keys, cursor = [], b"0"
            while True:
                cursor, batch = redis_call(node.port, "SCAN", cursor, "MATCH", "rlock:*",
                                           "COUNT", 1000)
                keys += batch
                if cursor in (b"0", "0"):
                    break
            for k in sorted(set(keys)):
                # The fence outlives every hold, and the history (`rlock history`)
                # its last release by 30 days, by design.
                if re.fullmatch(rb"rlock:\{[^{}]*\}:(fence|history)", k):
                    continue
                item = {"key": k.decode(errors="replace"),
                        "type": redis_call(node.port, "TYPE", k),
                        "pttl_ms": redis_call(node.port, "PTTL", k)}
                if self.topo.kind != "single":
                    item["node"] = node.port
                left.append(item)
        return [x for x in left if x["type"] != "none"]

    def kill_everything(self):
        with self.lock:
            runs = list(self.active.values())
        for run in runs:
            self.send(run, signal.SIGCONT)
            self.send(run, signal.SIGKILL)
        try:
            self.sweep(record=False)
        except Exception as e:
            print(f"chaos: final sweep: {e!r}", file=sys.stderr)
        self.monitor_stop.set()
        if self.monitor_thread is not None:
            self.monitor_thread.join(timeout=5)
        self.topo.kill_all()


def build_rlock():
    print("== cargo build --release --locked", flush=True)
    subprocess.run(["cargo", "build", "--release", "--locked", "--quiet"], cwd=REPO, check=True)
    meta = subprocess.run(["cargo", "metadata", "--format-version", "1", "--no-deps"],
                          cwd=REPO, capture_output=True, text=True, check=True).stdout
    return os.path.join(json.loads(meta)["target_directory"], "release", "rlock")


def repo_head():
    try:
        head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--", "src"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return head + ("+dirty src" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "no git"


class Interrupted(Exception):
    pass


def main():
    p = argparse.ArgumentParser(
        description="Stress rlock with workers, random holds and injected faults; "
                    "exit 0 when no overlap went unreported, no fence went back, "
                    "no COMMAND was orphaned and no rlock hung.",
        epilog="The server faults (redis-stop, the restarts, client-pause, debug-sleep) "
               "hit the one server (single), the master a sentinel names now (sentinel) "
               "or a random master (cluster). tests/chaos/run's header explains every "
               "fault, topology and figure of the report.")
    p.add_argument("--rlock", default=os.environ.get("RLOCK_BIN"),
                   help="rlock binary (default: $RLOCK_BIN, else cargo build --release)")
    p.add_argument("--server", default=os.environ.get("RLOCK_TEST_SERVER") or "redis-server",
                   help="server binary, e.g. valkey-server (default: $RLOCK_TEST_SERVER, "
                        "else redis-server); the sentinels too")
    p.add_argument("--topology", choices=list(TOPOLOGIES), default="single",
                   help="single: one server (redis://; the default); sentinel: a primary, a "
                        "replica and 3 sentinels (redis+sentinel://), fault sentinel-failover; "
                        "cluster: 3 masters with a replica each (redis+cluster://), faults "
                        "slot-migration and cluster-failover")
    p.add_argument("--duration", type=float, default=None, help="seconds of load (default 60)")
    p.add_argument("--workers", type=int, default=8, help="workers per lock (default 8)")
    p.add_argument("--locks", type=int, default=2, help="number of locks (default 2)")
    p.add_argument("--ttl", type=parse_ms, default=parse_ms("1s"), help="--ttl (default 1s)")
    p.add_argument("--kill-after", type=parse_ms, default=parse_ms("200ms"),
                   help="--kill-after (default 200ms)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    p.add_argument("--out", default=None, help="directory for logs and chaos.json "
                   "(default: a new /tmp/rlock-chaos.* directory)")
    p.add_argument("--fault-interval", type=parse_range, default=(1.0, 2.0), metavar="MIN-MAX",
                   help="seconds between faults, uniform (default 1-2)")
    p.add_argument("--faults", type=parse_kinds, default=None,
                   help="comma-separated fault kinds, 'all' (every kind the topology takes) or "
                        "'none'; default: all but redis-restart-lose with sentinel or cluster. "
                        "Kinds: " + ", ".join(ALL_KINDS) + " (sentinel-failover: sentinel "
                        "only; slot-migration, cluster-failover: cluster only)")
    p.add_argument("--hung-margin", type=float, default=15.0,
                   help="seconds beyond wait+hold+ttl+kill-after after which an rlock is hung "
                        "(default 15)")
    p.add_argument("--rlock-arg", action="append", default=[], metavar="ARG",
                   help="extra global option for every rlock run, e.g. --rlock-arg=-v "
                        "(repeatable; rlock's stderr is kept per run)")
    p.add_argument("--short", action="store_true",
                   help="CI preset: 48 s of load, about a minute in all")
    p.add_argument("--work", default=None, help=argparse.SUPPRESS)
    p.add_argument("-v", "--verbose", action="store_true", help="print every fault as it happens")
    args = p.parse_args()
    if args.duration is None:
        args.duration = 48.0 if args.short else 60.0
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1 << 31)
    every, default = topology_kinds(args.topology)
    if args.faults is None:
        args.faults = default
    elif args.faults == "all":
        args.faults = every
    elif args.faults == "none":
        args.faults = []
    else:
        wrong = [k for k in args.faults if k not in every]
        if wrong:
            p.error(f"--faults: {', '.join(wrong)} not with --topology {args.topology} "
                    f"(it takes {', '.join(every)})")
    if args.workers < 1 or args.locks < 1 or args.duration <= 0:
        p.error("--workers, --locks and --duration must be positive")
    if args.ttl < 100:
        p.error("--ttl must be at least 100ms (rlock's minimum)")
    if shutil.which(args.server) is None:
        p.error(f"--server: no executable {args.server!r}")
    if not hasattr(os, "pidfd_open") or not hasattr(signal, "pidfd_send_signal"):
        sys.exit("chaos: needs Linux >= 5.3 and Python >= 3.9 (pidfds)")

    built = not args.rlock
    rlock = build_rlock() if built else os.path.abspath(args.rlock)
    if not os.access(rlock, os.X_OK):
        sys.exit(f"chaos: {rlock} is not an executable")
    own_work = args.work is None
    work = args.work or tempfile.mkdtemp(prefix="rlock-chaos-work.")
    out = os.path.abspath(args.out) if args.out else tempfile.mkdtemp(prefix="rlock-chaos.")
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(out):  # logs of an earlier run would be read as ours
        if re.fullmatch(r"(probe-.*\.log|rlock-.*\.stderr|runs\.jsonl|faults\.jsonl|"
                        r"chaos\.json|redis\.log|(node|sentinel)-\d+\.log)", name):
            os.unlink(os.path.join(out, name))

    h = Harness(args, rlock, work, out)
    interrupted = []

    def on_signal(signum, _frame):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        interrupted.append(signum)
        raise Interrupted()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    threads = []
    code = 2
    try:
        h.build_probe()
        version = subprocess.run([rlock, "--version"], capture_output=True, text=True).stdout
        meta = {"rlock": rlock, "rlock_version": version.strip() or "?",
                "repo_head": repo_head(),
                "binary": (f"built from {repo_head()}" if built else f"binary {rlock}"),
                "redis": h.server.name + " " + ".".join(map(str, h.server.version)),
                "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
        if h.topo.kind != "single":
            meta["redis"] += ", " + h.topo.describe()
        h.topo.start()
        where = (f"on 127.0.0.1:{h.port}" if h.topo.kind == "single"
                 else f"{args.topology} ({h.url})")
        print(f"chaos: {args.locks} locks x {args.workers} workers for {args.duration:g} s, "
              f"{h.server.name} {where}, seed {args.seed}, logs in {out}", flush=True)
        h.t0 = mono()
        if h.topo.kind != "single":
            h.monitor_thread = threading.Thread(target=h.topo.monitor,
                                                args=(h, h.monitor_stop), daemon=True)
            h.monitor_thread.start()
        for lock in h.locks:
            for i in range(args.workers):
                t = threading.Thread(target=h.worker, args=(lock, i), daemon=True)
                t.start()
                threads.append(t)
        inj = h.injector_thread = threading.Thread(target=h.injector, daemon=True)
        inj.start()
        end_at = h.t0 + int(args.duration * 1e9)
        next_note = h.t0 + 10_000_000_000
        while mono() < end_at:
            time.sleep(min(0.2, max(0, (end_at - mono()) / 1e9)))
            if mono() >= next_note and not args.verbose:
                next_note += 10_000_000_000
                print(f"  {(mono() - h.t0) / 1e9:4.0f} s: {len(h.runs)} runs, "
                      f"{len(h.faults)} faults", flush=True)
        # Stop faults (undoing the pending ones), let the workers finish.
        h.stopping.set()
        inj.join()
        for t in h.fault_threads:
            t.join(timeout=15 if h.topo.kind == "single" else 30)
        h.topo.recover()  # every server up and unpaused (and the topology settled)
        print(f"  {(mono() - h.t0) / 1e9:4.0f} s: load stopped; waiting for the last runs",
              flush=True)
        for t in threads:
            while t.is_alive():  # each run ends by its hung deadline at the latest
                t.join(timeout=0.2)
        time.sleep(h.ttl_ms / 1000 + SETTLE_MARGIN_S)
        h.sweep()
        h.monitor_stop.set()
        if h.monitor_thread is not None:
            h.monitor_thread.join(timeout=5)
        left = h.keys_left_found = h.keys_left()
        res, detail = analyse(h, left)
        report = {"meta": meta, "config": {
            "duration_s": args.duration, "workers": args.workers, "locks": args.locks,
            "ttl_ms": h.ttl_ms, "kill_after_ms": h.ka_ms, "seed": args.seed,
            "fault_interval_s": list(args.fault_interval), "faults": args.faults,
            "hung_margin_s": args.hung_margin, "rlock_args": args.rlock_arg,
            **({} if args.topology == "single" else {"topology": args.topology,
                                                     "url": h.url})},
            "result": res, "detail": detail,
            "faults": [{"kind": f["kind"], "at_ms": h.rel(f["t_ns"]), "end_ms": h.rel(f["end_ns"]),
                        **{k: v for k, v in f.items() if k not in ("kind", "t_ns", "end_ns")}}
                       for f in h.faults]}
        with open(os.path.join(out, "chaos.json"), "w") as f:
            json.dump(report, f, indent=1)
        print_report(h, res, meta)
        code = 0 if res["pass"] else 1
    except Interrupted:
        print(f"\nchaos: interrupted; logs in {out}", file=sys.stderr)
        code = 128 + interrupted[0]
    except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
        print(f"chaos: {e}", file=sys.stderr)
        if isinstance(e, OSError):
            traceback.print_exc()
        code = 2
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        h.stopping.set()
        if h.injector_thread is not None:
            h.injector_thread.join(timeout=20)
        h.run_undo(None)
        h.kill_everything()
        h.runs_file.close()
        h.faults_file.close()
        if own_work:
            shutil.rmtree(work, ignore_errors=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
