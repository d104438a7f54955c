"""The servers the workers' rlocks talk to (--topology), and the faults that
only a replicated topology has:

  single    one redis-server (redis://), as the harness always had;
  sentinel  a primary, a replica (--replicaof) and three sentinels watching them as
            "mymaster" (redis+sentinel://); fault sentinel-failover;
  cluster   three masters with a replica each (redis+cluster://); faults
            slot-migration and cluster-failover.

Every topology names the node a server fault (redis-stop, a restart,
client-pause, debug-sleep) hits: the one server; the master the sentinels
name now; a random master. A replicated topology also watches for master
switches (planned or not) and records each as an observed event
("master-switch"), so the analysis can name the failovers near an overlap."""

import os
import socket
import subprocess
import sys
import time

from resp import RedisError, free_port, redis_call
from server import Server

ERRORS = (OSError, ConnectionError, RedisError)
CLUSTER_ARGS = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", "1000"]
SENTINEL_CONF = """port {port}
bind 127.0.0.1
dir {dir}
logfile {log}
sentinel monitor mymaster 127.0.0.1 {primary} 2
sentinel down-after-milliseconds mymaster 1000
sentinel failover-timeout mymaster 5000
"""


def mono():
    return time.monotonic_ns()


def text(value):
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def info(port, section, timeout=1.0):
    """INFO SECTION as a dict of its fields."""
    out = {}
    for line in text(redis_call(port, "INFO", section, timeout=timeout)).splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k] = v.strip()
    return out


def pairs(reply):
    """A flat [k1, v1, k2, v2, ...] reply as a dict of strings."""
    items = [text(x) for x in reply or []]
    return dict(zip(items[::2], items[1::2]))


def wait_for(seconds, what, ok, interval=0.1):
    deadline = time.monotonic() + seconds
    while True:
        try:
            if ok():
                return
        except ERRORS:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {seconds:g} s waiting for {what}")
        time.sleep(interval)


def free_ports(n):
    """N distinct free 127.0.0.1 ports (all bound at once while choosing)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def bindable(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def cluster_ports(n):
    """N ports for cluster nodes: each node also listens on port + 10000 (its
    bus), so both are taken below the kernel's ephemeral range (20000-22767,
    buses 30000-32767), where no outgoing connection takes them meanwhile."""
    base = 20000 + (os.getpid() * 7919) % 2500
    ports = []
    for p in list(range(base, 22768)) + list(range(20000, base)):
        if bindable(p) and bindable(p + 10000):
            ports.append(p)
            if len(ports) == n:
                return ports
    raise RuntimeError("no free ports for the cluster nodes (20000-22767 and +10000)")


class Single:
    """One redis-server: the harness's original setup, kept exactly."""

    kind = "single"
    default_excluded = ()

    def __init__(self, binary, work, out):
        self.port = free_port()
        self.server = Server(binary, work, self.port, os.path.join(out, "redis.log"))
        self.nodes = [self.server]
        self.procs = [self.server]
        self.url = f"redis://127.0.0.1:{self.port}"
        self.restart_blocked = None

    def describe(self):
        return ""

    def start(self):
        self.server.start(wipe=True)

    def fault_node(self, rng):
        return self.server

    def node_detail(self, node):
        return {}

    def restart(self, node, wipe):
        node.kill()
        t_kill = mono()
        node.start(wipe=wipe)
        return t_kill

    def recover(self):
        if not self.server.alive():
            self.server.start(wipe=False)
        try:
            redis_call(self.port, "CLIENT", "UNPAUSE", timeout=5)
        except ERRORS:
            pass

    def sweep_nodes(self):
        return [self.server]

    def monitor(self, h, stop):
        pass

    def kill_all(self):
        for p in self.procs:
            p.kill()
            try:
                os.unlink(p.pidfile)
            except OSError:
                pass


class Replicated(Single):
    """What the Sentinel and Cluster topologies share."""

    default_excluded = ("redis-restart-lose",)

    def node_detail(self, node):
        return {"node": node.port}

    # restart: as Single's. A master restarts as a master (its old --replicaof,
    # if it was once a replica, would point at a replica now); a cluster node
    # keeps its nodes.conf (also when its data is removed), so it rejoins with
    # its role.

    def unpause_all(self):
        for n in self.nodes:
            if n.alive():
                try:
                    n.call("CLIENT", "UNPAUSE", timeout=5)
                except ERRORS:
                    pass

    def log_end(self, h, rec):
        """A second faults.jsonl line for a fault whose end came later."""
        h.log_fault_end(rec)


class Sentinel(Replicated):
    kind = "sentinel"

    def __init__(self, binary, work, out):
        ports = free_ports(5)
        self.nodes = [Server(binary, work, p, os.path.join(out, f"node-{i + 1}.log"),
                             name=f"node-{i + 1}") for i, p in enumerate(ports[:2])]
        self.sentinels = []
        for i, p in enumerate(ports[2:]):
            name = f"sentinel-{i + 1}"
            conf = os.path.join(work, f"{name}-data", "sentinel.conf")
            self.sentinels.append(Server(binary, work, p, os.path.join(out, f"{name}.log"),
                                         name=name, sentinel_conf=conf))
        self.procs = self.nodes + self.sentinels
        self.server = self.nodes[0]
        self.port = self.server.port
        self.url = ("redis+sentinel://"
                    + ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels) + "/mymaster")
        self.last_master = self.nodes[0]
        self.restart_blocked = None
        self.failing_over = False

    def describe(self):
        return (f"sentinel: a primary and a replica (127.0.0.1:{self.nodes[0].port}, "
                f":{self.nodes[1].port}), 3 sentinels")

    def start(self):
        primary, replica = self.nodes
        primary.start(wipe=True)
        replica.start(wipe=True, replicaof=primary.port)

        def synced():
            i = info(primary.port, "replication")
            return i.get("connected_slaves") == "1" and "state=online" in i.get("slave0", "")
        wait_for(30, "the replica to sync", synced)
        for s in self.sentinels:
            s.wipe()
            os.makedirs(s.dir, exist_ok=True)
            with open(s.sentinel_conf, "w") as f:
                f.write(SENTINEL_CONF.format(port=s.port, dir=s.dir, log=s.logfile,
                                             primary=primary.port))
            s.start()

        def known():
            for s in self.sentinels:
                if not s.call("SENTINEL", "REPLICAS", "mymaster", timeout=1):
                    return False
                if len(s.call("SENTINEL", "SENTINELS", "mymaster", timeout=1) or []) < 2:
                    return False
            return True
        wait_for(60, "the sentinels to know the replica and each other", known, 0.2)

    def master(self):
        """The node a sentinel names as the master now (asked in turn), else
        the last one named."""
        for s in self.sentinels:
            try:
                addr = s.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster", timeout=1)
            except ERRORS:
                continue
            if addr and len(addr) == 2:
                port = int(text(addr[1]))
                for n in self.nodes:
                    if n.port == port:
                        self.last_master = n
                        return n
        return self.last_master

    def fault_node(self, rng):
        return self.master()

    def sentinel_failover(self, h, rng):
        kind = "sentinel-failover"
        s = rng.choice(self.sentinels)
        now = mono()
        for other in self.sentinels:
            try:
                flags = pairs(other.call("SENTINEL", "MASTER", "mymaster", timeout=1)).get(
                    "flags", "")
            except ERRORS:
                continue
            if "failover_in_progress" in flags:
                h.add_fault(kind, now, now, sentinel=s.port,
                            skipped=f"a failover is in progress (sentinel {other.port})")
                return
        old = self.master()
        try:
            s.call("SENTINEL", "FAILOVER", "mymaster", timeout=5)
        except RedisError as e:
            what = "in progress" if str(e).startswith("INPROG") else "refused"
            h.add_fault(kind, now, mono(), sentinel=s.port, skipped=f"{what}: {e}")
            return
        rec = h.add_fault(kind, now, mono(), sentinel=s.port, **{"from": old.port})
        self.failing_over = True

        def follow():
            # Its end: when that sentinel names another master.
            try:
                deadline = mono() + 15_000_000_000
                while mono() < deadline:
                    try:
                        addr = s.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster",
                                      timeout=1)
                        if addr and int(text(addr[1])) != old.port:
                            rec["to"] = int(text(addr[1]))
                            rec["switched"] = True
                            break
                    except ERRORS:
                        pass
                    time.sleep(0.05)
                else:
                    rec["switched"] = False
                rec["end_ns"] = mono()
                self.log_end(h, rec)
            finally:
                self.failing_over = False
        h.background(follow)

    def recover(self):
        master = self.master()
        for n in self.nodes:
            if not n.alive():
                n.start(wipe=False, replicaof=None if n is master else master.port)
        self.unpause_all()
        # Settled enough for the sweep: the sentinels agree on a master that
        # says it is one. (The old master of a failover can take another 10 s to
        # be made a replica; rlock asks the sentinels, so it does not matter.)

        def settled():
            named = set()
            for s in self.sentinels:
                addr = s.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster", timeout=1)
                named.add(int(text(addr[1])))
            return (len(named) == 1
                    and info(named.pop(), "replication").get("role") == "master")
        try:
            wait_for(30, "the sentinels to agree on a master", settled, 0.2)
        except RuntimeError as e:
            print(f"chaos: {e}; sweeping what the first sentinel names", flush=True)

    def sweep_nodes(self):
        return [self.master()]

    def monitor(self, h, stop):
        """Master switches, from the sentinels' config epoch: one event per
        epoch, spanning the last poll that saw the previous epoch."""
        epoch, port, t_prev = None, self.nodes[0].port, mono()
        while not stop.wait(0.2):
            best = None
            for s in self.sentinels:
                try:
                    m = pairs(s.call("SENTINEL", "MASTER", "mymaster", timeout=0.5))
                    addr = s.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster",
                                  timeout=0.5)
                    e = int(m.get("config-epoch", "0"))
                    to = int(text(addr[1]))
                except (*ERRORS, ValueError, TypeError, IndexError):
                    continue
                if best is None or e > best[0]:
                    best = (e, to, s.port)
            now = mono()
            if best is None:
                continue
            if epoch is None:
                epoch = best[0]
            elif best[0] > epoch:
                h.add_fault("master-switch", t_prev, now, observed=True, epoch=best[0],
                            sentinel=best[2], to=best[1], **{"from": port})
                epoch, port = best[0], best[1]
            t_prev = now


class ClusterNode:
    def __init__(self, line):
        parts = line.split()
        self.id = parts[0]
        self.port = int(parts[1].split("@")[0].rsplit(":", 1)[1])
        self.flags = set(parts[2].split(","))
        self.master_id = parts[3]
        self.epoch = int(parts[6])
        self.slots = []
        for s in parts[8:]:
            if s.startswith("["):  # a migrating or importing slot
                continue
            lo, _, hi = s.partition("-")
            self.slots.append((int(lo), int(hi or lo)))

    def serves(self, slot):
        return any(lo <= slot <= hi for lo, hi in self.slots)

    @property
    def is_master(self):
        return "master" in self.flags and "fail" not in self.flags

    @property
    def is_replica(self):
        return "slave" in self.flags and "fail" not in self.flags


class Cluster(Replicated):
    kind = "cluster"

    def __init__(self, binary, work, out):
        self.binary = binary
        ports = cluster_ports(6)
        self.nodes = [Server(binary, work, p, os.path.join(out, f"node-{i + 1}.log"),
                             name=f"node-{i + 1}", extra=CLUSTER_ARGS, keep=("nodes.conf",))
                      for i, p in enumerate(ports)]
        self.procs = list(self.nodes)
        self.server = self.nodes[0]
        self.port = self.server.port
        self.url = f"redis+cluster://127.0.0.1:{ports[0]},127.0.0.1:{ports[1]}"
        self.by_port = {n.port: n for n in self.nodes}
        self.slots = {}
        self.migrating = False
        self.failing_over = False
        self.restart_blocked = self.migration_under_way
        self.pref = 0

    def migration_under_way(self):
        return "a slot migration is under way" if self.migrating else None

    def describe(self):
        return "cluster: 3 masters, a replica each (127.0.0.1:" + ",".join(
            str(n.port) for n in self.nodes) + ")"

    def start(self):
        for n in self.nodes:
            n.start(wipe=True)
        cli = "redis-cli"
        sibling = os.path.join(os.path.dirname(os.path.abspath(self.binary)), "valkey-cli")
        if os.path.basename(self.binary).startswith("valkey") and os.access(sibling, os.X_OK):
            cli = sibling
        p = subprocess.run([cli, "--cluster", "create",
                            *[f"127.0.0.1:{n.port}" for n in self.nodes],
                            "--cluster-replicas", "1", "--cluster-yes"],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            raise RuntimeError(f"{cli} --cluster create failed:\n{p.stdout}{p.stderr}")

        def ok():
            for n in self.nodes:
                if "cluster_state:ok" not in text(n.call("CLUSTER", "INFO", timeout=1)):
                    return False
            for n in self.nodes:
                r = info(n.port, "replication")
                if r.get("role") == "slave" and r.get("master_link_status") != "up":
                    return False
                if r.get("role") == "master" and "state=online" not in r.get("slave0", ""):
                    return False
            return True
        wait_for(60, "the cluster to be ok and every replica online", ok, 0.2)

    def view(self):
        """CLUSTER NODES as one node sees it (the last that answered, else the next)."""
        for i in range(len(self.nodes)):
            n = self.nodes[(self.pref + i) % len(self.nodes)]
            if not n.alive():
                continue
            try:
                out = text(n.call("CLUSTER", "NODES", timeout=0.5))
            except ERRORS:
                continue
            self.pref = (self.pref + i) % len(self.nodes)
            return [ClusterNode(line) for line in out.splitlines() if len(line.split()) >= 8]
        raise RuntimeError("no cluster node answered CLUSTER NODES")

    def masters(self, view=None):
        view = view if view is not None else self.view()
        return sorted((m for m in view if m.is_master and m.slots and m.port in self.by_port),
                      key=lambda m: m.port)

    def slot_of(self, lock):
        if lock not in self.slots:
            key = "rlock:{" + lock + "}:leases"
            for n in self.nodes:
                try:
                    self.slots[lock] = int(n.call("CLUSTER", "KEYSLOT", key, timeout=1))
                    break
                except ERRORS:
                    continue
            else:
                raise RuntimeError("no cluster node answered CLUSTER KEYSLOT")
        return self.slots[lock]

    def locks_of(self, h, node):
        return [lock for lock in h.locks if node.serves(self.slot_of(lock))]

    def fault_node(self, rng):
        return self.by_port[rng.choice(self.masters()).port]

    # --- slot-migration --------------------------------------------------

    def slot_migration(self, h, rng, lock):
        kind = "slot-migration"
        now = mono()
        slot = self.slot_of(lock)
        if self.migrating or self.failing_over:
            h.add_fault(kind, now, now, lock=lock, skipped="a slot migration or a cluster "
                        "failover is under way")
            return
        view = self.view()
        owners = [m for m in self.masters(view) if m.serves(slot)]
        if len(owners) != 1 or any("fail?" in n.flags or "fail" in n.flags for n in view):
            h.add_fault(kind, now, now, lock=lock, slot=slot,
                        skipped="the cluster is not settled (a node failing, or no one owner)")
            return
        src = owners[0]
        tgt = rng.choice([m for m in self.masters(view) if m.id != src.id])
        pause1, pause2 = rng.uniform(0.5, 3.0), rng.uniform(0.0, 2.0)
        self.migrating = True
        rec = h.add_fault(kind, now, now, lock=lock, slot=slot, source=src.port,
                          target=tgt.port, importing_ms=round(pause1 * 1000),
                          moved_ms=round(pause2 * 1000))

        def migrate():
            try:
                try:
                    redis_call(tgt.port, "CLUSTER", "SETSLOT", slot, "IMPORTING", src.id)
                    redis_call(src.port, "CLUSTER", "SETSLOT", slot, "MIGRATING", tgt.id)
                    time.sleep(pause1)
                    rec["keys"] = self.move_keys(src.port, tgt.port, slot)
                    rec["t_moved_ms"] = h.rel(mono())
                    time.sleep(pause2)
                    self.assign(slot, tgt.id, [m.port for m in self.masters()], tgt.port)
                except ERRORS as e:
                    # Never leave the slot half-moved (every lock's script in it
                    # would get TRYAGAIN forever): finish the move to the target.
                    rec["trouble"] = repr(e)
                    try:
                        self.repair(slot, tgt.id)
                        rec["repaired"] = True
                    except (*ERRORS, RuntimeError) as e2:
                        rec["repaired"] = False
                        print(f"chaos: slot {slot} ({lock}) could not be moved to "
                              f"127.0.0.1:{tgt.port}: {e!r}, then {e2!r}", file=sys.stderr)
            finally:
                rec["end_ns"] = mono()
                self.migrating = False
                self.log_end(h, rec)
        h.background(migrate)

    def move_keys(self, src_port, tgt_port, slot, deadline_s=20):
        """MIGRATE every key of SLOT from SRC to TGT (again, until none is left)."""
        moved = 0
        deadline = time.monotonic() + deadline_s
        while True:
            keys = redis_call(src_port, "CLUSTER", "GETKEYSINSLOT", slot, 1000) or []
            if not keys:
                return moved
            r = redis_call(src_port, "MIGRATE", "127.0.0.1", tgt_port, "", 0, 5000,
                           "KEYS", *keys, timeout=10)
            if r == "OK":
                moved += len(keys)
            if time.monotonic() > deadline:
                raise RuntimeError(f"keys of slot {slot} still on 127.0.0.1:{src_port}")

    def assign(self, slot, owner_id, master_ports, owner_port):
        """CLUSTER SETSLOT SLOT NODE OWNER on every master, the new owner first."""
        for port in [owner_port] + [p for p in master_ports if p != owner_port]:
            redis_call(port, "CLUSTER", "SETSLOT", slot, "NODE", owner_id)

    def repair(self, slot, target_id, seconds=20):
        """Moves SLOT to TARGET (or, if it is a replica now, to its master) from
        wherever its keys are, and assigns it there on every master."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                view = self.view()
                by_id = {n.id: n for n in view}
                final = by_id[target_id]
                if not final.is_master:
                    final = by_id[final.master_id]
                masters = self.masters(view)
                for m in masters:
                    if m.id == final.id:
                        continue
                    if redis_call(m.port, "CLUSTER", "COUNTKEYSINSLOT", slot) > 0:
                        # The final node may see no owner of the slot (its old
                        # owner failed over): RESTORE-ASKING would get CLUSTERDOWN.
                        for port, args in ((final.port, ("NODE", m.id)),
                                           (final.port, ("IMPORTING", m.id)),
                                           (m.port, ("MIGRATING", final.id))):
                            try:
                                redis_call(port, "CLUSTER", "SETSLOT", slot, *args)
                            except RedisError:
                                pass
                        self.move_keys(m.port, final.port, slot, deadline - time.monotonic())
                self.assign(slot, final.id, [m.port for m in masters], final.port)
                return
            except (*ERRORS, KeyError, RuntimeError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    # --- cluster-failover --------------------------------------------------

    def cluster_failover(self, h, rng):
        kind = "cluster-failover"
        now = mono()
        if self.migrating or self.failing_over:
            h.add_fault(kind, now, now, skipped="a slot migration or a cluster failover "
                        "is under way")
            return
        view = self.view()
        m = rng.choice(self.masters(view))
        replicas = sorted((n for n in view if n.is_replica and n.master_id == m.id
                           and n.port in self.by_port), key=lambda n: n.port)
        if not replicas:
            h.add_fault(kind, now, now, master=m.port, skipped="the master has no replica")
            return
        r = replicas[0]
        locks = self.locks_of(h, m)
        try:
            redis_call(r.port, "CLUSTER", "FAILOVER", timeout=5)
        except RedisError as e:
            h.add_fault(kind, now, mono(), master=m.port, replica=r.port, locks=locks,
                        skipped=f"refused: {e}")
            return
        self.failing_over = True
        rec = h.add_fault(kind, now, mono(), master=m.port, replica=r.port, locks=locks)

        def follow():
            # Its end: when the replica says it is the master (a manual
            # failover gives up after 5 s).
            try:
                deadline = mono() + 10_000_000_000
                rec["switched"] = False
                while mono() < deadline:
                    try:
                        if info(r.port, "replication").get("role") == "master":
                            rec["switched"] = True
                            break
                    except ERRORS:
                        pass
                    time.sleep(0.05)
                rec["end_ns"] = mono()
                self.log_end(h, rec)
            finally:
                self.failing_over = False
        h.background(follow)

    # --- the end -----------------------------------------------------------

    def recover(self):
        for n in self.nodes:
            if not n.alive():
                n.start(wipe=False)
        self.unpause_all()

        def ok():
            for n in self.nodes:
                if "cluster_state:ok" not in text(n.call("CLUSTER", "INFO", timeout=1)):
                    return False
                if "[" in text(n.call("CLUSTER", "NODES", timeout=1)):
                    return False  # a slot still migrating or importing
            return True
        try:
            wait_for(30, "the cluster to be ok", ok, 0.2)
        except RuntimeError as e:
            print(f"chaos: {e}; sweeping the masters as they are", flush=True)

    def sweep_nodes(self):
        return [self.by_port[m.port] for m in self.masters()]

    def monitor(self, h, stop):
        """Master switches: a node seen as a replica, then as a master (once
        per config epoch it got)."""
        was_replica, done = {}, set()
        t_prev = mono()
        while not stop.wait(0.25):
            try:
                view = self.view()
            except (RuntimeError, ValueError, IndexError):
                continue
            now = mono()
            ports = {n.id: n.port for n in view}
            for n in view:
                if n.is_replica:
                    was_replica[n.id] = ports.get(n.master_id)
                elif n.is_master and n.slots and n.id in was_replica \
                        and (n.id, n.epoch) not in done:
                    done.add((n.id, n.epoch))
                    h.add_fault("master-switch", t_prev, now, observed=True, to=n.port,
                                locks=[lock for lock in h.locks if n.serves(self.slot_of(lock))],
                                **{"from": was_replica.pop(n.id)})
            t_prev = now


TOPOLOGIES = {"single": Single, "sentinel": Sentinel, "cluster": Cluster}
