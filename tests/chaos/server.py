"""The servers under test: each started, stopped, killed and restarted by PID,
on one port, with its AOF or with its data removed. A topology (topology.py)
is one or more of them."""

import os
import re
import shutil
import signal
import subprocess
import threading
import time

from resp import RedisError, redis_call


class Server:
    """One redis-server (or sentinel) process of the harness's: always with AOF
    (appendfsync always), so a SIGKILL + restart keeps the data; a restart
    "without persistence" removes the data directory first (but the files in
    `keep`, e.g. a cluster node's nodes.conf). `gen` counts incarnations, so a
    delayed SIGCONT never reaches a newer one.

    NAME names its files: WORK/NAME-data (its directory and working
    directory), WORK/NAME.pid (its PID, for tests/chaos/run's cleanup) and
    the log file given. A sentinel (`sentinel_conf`) runs `BINARY CONF
    --sentinel` instead, its config file in its directory."""

    def __init__(self, binary, work, port, logfile, name="redis", extra=(),
                 sentinel_conf=None, keep=()):
        self.binary = binary
        self.port = port
        self.label = name
        self.dir = os.path.join(work, f"{name}-data")
        self.logfile = logfile
        self.pidfile = os.path.join(work, f"{name}.pid")
        self.extra = list(extra)
        self.sentinel_conf = sentinel_conf
        self.keep = tuple(keep)
        self.proc = None
        self.gen = 0
        self.lock = threading.RLock()
        text = subprocess.run([binary, "--version"], capture_output=True,
                              text=True, check=True).stdout
        m = re.search(r"v=(\d+)\.(\d+)\.(\d+)", text)
        self.version = tuple(int(x) for x in m.groups()) if m else (0, 0, 0)
        # "Redis server v=7.0.15 ..." or "Valkey server v=8.1.8 ...".
        self.name = (text.split() or ["redis"])[0].lower()

    def wipe(self):
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)
            return
        for entry in os.listdir(self.dir) if os.path.isdir(self.dir) else []:
            if entry in self.keep:
                continue
            path = os.path.join(self.dir, entry)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.unlink(path)
                except OSError:
                    pass

    def argv(self, replicaof=None):
        if self.sentinel_conf is not None:
            return [self.binary, self.sentinel_conf, "--sentinel"]
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "yes", "--appendfsync", "always",
                "--dir", self.dir, "--logfile", self.logfile]
        if self.version >= (7, 0, 0):
            args += ["--enable-debug-command", "yes"]
        args += self.extra
        if replicaof is not None:
            args += ["--replicaof", "127.0.0.1", str(replicaof)]
        return args

    def start(self, wipe=False, replicaof=None):
        """Starts it (a replica of 127.0.0.1:REPLICAOF when given) and waits
        until it answers PING."""
        with self.lock:
            if wipe:
                self.wipe()
            os.makedirs(self.dir, exist_ok=True)
            self.proc = subprocess.Popen(self.argv(replicaof), stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         cwd=self.dir, start_new_session=True)
            with open(self.pidfile, "w") as f:
                f.write(f"{self.proc.pid}\n")
            self.gen += 1
            deadline = time.monotonic() + 15
            what = "redis-server" if self.label == "redis" else self.label
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{what} exited at start; see {self.logfile}")
                try:
                    if redis_call(self.port, "PING", timeout=1) == "PONG":
                        return
                except (OSError, RedisError, ConnectionError):
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{what} did not answer; see {self.logfile}")
                time.sleep(0.01)

    def kill(self):
        with self.lock:
            if self.proc is not None:
                if self.proc.poll() is None:
                    self.proc.send_signal(signal.SIGKILL)
                self.proc.wait()

    def signal(self, sig, gen):
        with self.lock:
            if gen == self.gen and self.proc is not None and self.proc.poll() is None:
                self.proc.send_signal(sig)

    def alive(self):
        with self.lock:
            return self.proc is not None and self.proc.poll() is None

    def call(self, *args, timeout=5.0):
        return redis_call(self.port, *args, timeout=timeout)
