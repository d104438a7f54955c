"""The server under test: started, stopped, killed and restarted by PID, on
one port, with its AOF or with its data removed."""

import os
import re
import shutil
import signal
import subprocess
import threading
import time

from resp import RedisError, redis_call


class Server:
    """The harness's own redis-server: always with AOF (appendfsync always), so a
    SIGKILL + restart keeps the data; a restart "without persistence" removes
    the data directory first. `gen` counts incarnations, so a delayed SIGCONT
    never reaches a newer one."""

    def __init__(self, binary, work, port, logfile):
        self.binary = binary
        self.port = port
        self.dir = os.path.join(work, "redis-data")
        self.logfile = logfile
        self.pidfile = os.path.join(work, "redis.pid")
        self.proc = None
        self.gen = 0
        self.lock = threading.RLock()
        text = subprocess.run([binary, "--version"], capture_output=True,
                              text=True, check=True).stdout
        m = re.search(r"v=(\d+)\.(\d+)\.(\d+)", text)
        self.version = tuple(int(x) for x in m.groups()) if m else (0, 0, 0)
        # "Redis server v=7.0.15 ..." or "Valkey server v=8.1.8 ...".
        self.name = (text.split() or ["redis"])[0].lower()

    def start(self, wipe=False):
        with self.lock:
            if wipe:
                shutil.rmtree(self.dir, ignore_errors=True)
            os.makedirs(self.dir, exist_ok=True)
            args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", "yes", "--appendfsync", "always",
                    "--dir", self.dir, "--logfile", self.logfile]
            if self.version >= (7, 0, 0):
                args += ["--enable-debug-command", "yes"]
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         start_new_session=True)
            with open(self.pidfile, "w") as f:
                f.write(f"{self.proc.pid}\n")
            self.gen += 1
            deadline = time.monotonic() + 15
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"redis-server exited at start; see {self.logfile}")
                try:
                    if redis_call(self.port, "PING", timeout=1) == "PONG":
                        return
                except (OSError, RedisError, ConnectionError):
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not answer; see {self.logfile}")
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
