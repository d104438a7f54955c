"""What the chaos run's probes and rlocks did, checked: overlaps (reported
or not), fence regressions, orphans, hung rlocks, keys left; and the report."""

import os

# Faults after which a holder whose section spans them must exit 70.
LEASE_BREAKING = ("force-release", "redis-restart-lose", "holder-stop")
# Failovers (--topology sentinel or cluster): the new master lacks a hold the
# replica had not received yet. Such a hold is lost on the server like one a
# restart without data lost, and the same applies: an overlap after it counts
# as reported only when a run of the pair said so (see told()).
# "master-switch" is a switch the harness saw (planned or not), the others
# the faults that asked for one (counted when the switch came).
FAILOVERS = ("master-switch", "sentinel-failover", "cluster-failover")


def concerns(f, lock):
    """Whether fault F can touch LOCK: it names that lock, lists it among the
    locks of the master it hit (a cluster failover), or names none."""
    if "locks" in f:
        return lock in f["locks"]
    return f.get("lock") in (None, lock)


def told(run, lost):
    """Whether the run said it lost the lock: it exited 70; or, for a hold
    LOST on the server, it was killed and its guardian, releasing, found the
    hold gone and said so (a guardian's line never excuses a COMMAND that
    outlived a lease the server kept)."""
    if run.status == 70:
        return True
    return (lost and run.status is not None and run.status < 0
            and "lock lost: it was no longer ours at release" in (run.stderr or ""))


def status_name(code):
    if code is None:
        return None
    return f"sig{-code}" if code < 0 else str(code)


# --- analysis -----------------------------------------------------------

def read_probe_logs(out):
    ev = {}
    for name in sorted(os.listdir(out)):
        if not (name.startswith("probe-") and name.endswith(".log")):
            continue
        for line in open(os.path.join(out, name), "rb"):
            parts = line.decode(errors="replace").split()
            if len(parts) < 4:
                continue
            e = ev.setdefault(parts[1], {"terms": []})
            t = int(parts[2])
            if parts[0] == "start" and len(parts) >= 6:
                e.update(start=t, pid=int(parts[3]), fence=parts[4], lock=parts[5])
            elif parts[0] == "term":
                e["terms"].append(t)
            elif parts[0] == "end":
                e["end"] = t
    return ev


def analyse(h, keys_left):
    ttl_ns = h.ttl_ms * 1_000_000
    ev = read_probe_logs(h.out)
    runs = sorted(h.runs, key=lambda r: r.t_launch)
    secs = []
    for r in runs:
        e = ev.get(r.id)
        if not e or "start" not in e:
            continue
        if "end" in e:
            end, src = e["end"], "probe"
        elif r.t_probe_dead is not None:
            end, src = r.t_probe_dead, "death-seen"
        else:
            end, src = r.t_exit, "rlock-exit"
        fence = int(e["fence"]) if e["fence"].isdigit() else None
        secs.append({"run": r, "start": e["start"], "end": end, "end_src": src,
                     "fence": fence, "term": e["terms"][0] if e["terms"] else None})

    def desc(s):
        r = s["run"]
        return {"run": r.id, "status": status_name(r.status), "start_ms": h.rel(s["start"]),
                "end_ms": h.rel(s["end"]), "end_from": s["end_src"], "fence": s["fence"],
                "hold_ms": r.hold_ms, "grace_ms": r.grace_ms,
                "sigterm_ms": h.rel(s["term"]), "faults": r.faults, "stderr": r.stderr}

    def faults_near(lock, lo, hi):
        out = []
        for f in h.faults:
            if f.get("skipped") or f.get("error"):
                continue
            if not concerns(f, lock):
                continue
            if f["t_ns"] <= hi and f["end_ns"] >= lo:
                out.append(f)
        return out

    def lost_on_server(lock, lo, hi):
        """Faults that made the server forget a hold of LOCK between LO and HI."""
        return [f for f in h.faults
                if not f.get("skipped") and not f.get("error")
                and (f["kind"] == "redis-restart-lose"
                     or (f["kind"] == "force-release" and f.get("lock") == lock
                         and f.get("status") == 0)
                     or (f["kind"] in FAILOVERS and f.get("switched", True)
                         and concerns(f, lock)))
                and f["t_ns"] <= hi and f["end_ns"] >= lo]

    by_lock = {}
    for s in secs:
        by_lock.setdefault(s["run"].lock, []).append(s)
    unreported, reported = [], []
    cause_unrep, cause_rep = {}, {}
    split_unrep = {"hold lost on the server": 0, "other": 0}
    split_rep = dict(split_unrep)
    fence_regr, fence_missing = [], 0
    for lock, ss in by_lock.items():
        ss.sort(key=lambda s: s["start"])
        for i, a in enumerate(ss):
            for b in ss[i + 1:]:
                if b["start"] >= a["end"]:
                    break
                near = faults_near(lock, a["start"] - 2 * ttl_ns, b["start"])
                kinds = sorted({f["kind"] for f in near}) or ["none"]
                # A hold can be lost between its acquisition and COMMAND's start.
                lost = bool(lost_on_server(lock, a["start"] - ttl_ns, b["start"]))
                overlap_ns = min(a["end"], b["end"]) - b["start"]
                item = {"lock": lock, "overlap_ms": round(overlap_ns / 1e6, 3),
                        "hold_lost_on_server": lost, "first": desc(a), "second": desc(b),
                        "faults_near": [{"kind": f["kind"], "at_ms": h.rel(f["t_ns"]),
                                         "end_ms": h.rel(f["end_ns"]),
                                         **({"run": f["run"]} if "run" in f else {})}
                                        for f in near]}
                is_rep = told(a["run"], lost) or told(b["run"], lost)
                (reported if is_rep else unreported).append(item)
                counter = cause_rep if is_rep else cause_unrep
                for k in kinds:
                    counter[k] = counter.get(k, 0) + 1
                split = split_rep if is_rep else split_unrep
                split["hold lost on the server" if lost else "other"] += 1
        # Fences: a section that started after another ended has a larger fence.
        ended = sorted((s for s in ss if s["fence"] is not None), key=lambda s: s["end"])
        fence_missing += sum(1 for s in ss if s["fence"] is None)
        j, best = 0, None
        for b in ss:
            if b["fence"] is None:
                continue
            while j < len(ended) and ended[j]["end"] < b["start"]:
                if best is None or ended[j]["fence"] > best["fence"]:
                    best = ended[j]
                j += 1
            if best is not None and b["fence"] <= best["fence"]:
                near = faults_near(lock, best["end"], b["start"])
                fence_regr.append({"lock": lock, "earlier": desc(best), "later": desc(b),
                                   "faults_between": sorted({f["kind"] for f in near})})

    # SIGTERM: how long the probe ran on after it (exit-70 runs), and how it
    # compares with the next holder's start on the same lock.
    term_to_end, term_to_next = [], []
    for lock, ss in by_lock.items():
        for i, s in enumerate(ss):
            if s["term"] is None:
                continue
            if s["run"].status == 70:
                term_to_end.append(((s["end"] - s["term"]) / 1e6, s))
            nxt = [b["start"] for b in ss[i + 1:]]
            if nxt and not lost_on_server(lock, s["start"] - ttl_ns, s["end"]):
                term_to_next.append(((min(nxt) - s["term"]) / 1e6, s))

    # Runs whose lease a fault broke under their section and which did not exit 70.
    silent = {}
    silent_list = []
    for f in h.faults:
        if f["kind"] not in LEASE_BREAKING or f.get("skipped") or f.get("error"):
            continue
        if f["kind"] == "force-release" and f.get("status") != 0:
            continue
        for s in secs:
            r = s["run"]
            if f["kind"] == "holder-stop":
                hit = f.get("run") == r.id and f["end_ns"] - f["t_ns"] > ttl_ns
            else:
                hit = (f.get("lock") in (None, r.lock) and s["start"] < f["t_ns"]
                       and s["end"] > f["end_ns"])
            if hit and r.status != 70 and not r.hung and "holder-kill" not in r.faults:
                key = f"{f['kind']} -> exit {status_name(r.status)}"
                silent[key] = silent.get(key, 0) + 1
                silent_list.append({"fault": f["kind"], "at_ms": h.rel(f["t_ns"]), **desc(s)})

    # COMMAND started later than --wait allowed (rlock's start-up aside).
    overruns = [((s["start"] - s["run"].t_launch) / 1e6 - s["run"].wait_ms, s) for s in secs]
    overruns = [x for x in overruns if x[0] > 100]
    worst_over = max(overruns, key=lambda x: x[0]) if overruns else None

    statuses = {}
    for r in runs:
        k = status_name(r.status)
        statuses[k] = statuses.get(k, 0) + 1
    faults = {}
    skipped = 0
    seen = {}
    for f in h.faults:
        if f.get("observed"):
            seen[f["kind"]] = seen.get(f["kind"], 0) + 1
            continue
        if f.get("skipped") or f.get("error"):
            skipped += 1
            continue
        faults[f["kind"]] = faults.get(f["kind"], 0) + 1
    worst_end = max(term_to_end, key=lambda x: x[0]) if term_to_end else None
    worst_next = min(term_to_next, key=lambda x: x[0]) if term_to_next else None
    orphans = [r.id for r in runs if r.orphan]
    hung = [{"run": r.id, "status": status_name(r.status), "stderr": r.stderr,
             "faults": r.faults} for r in runs if r.hung]
    res = {
        "runs": len(runs),
        "sections": len(secs),
        "exit_statuses": dict(sorted(statuses.items(), key=lambda kv: -kv[1])),
        "faults": faults,
        "faults_skipped_or_failed": skipped,
        "unreported_overlaps": len(unreported),
        "unreported_overlaps_split": split_unrep,
        "unreported_overlaps_by_fault_near": cause_unrep,
        "reported_overlaps": len(reported),
        "reported_overlaps_split": split_rep,
        "reported_overlaps_by_fault_near": cause_rep,
        "fence_regressions": len(fence_regr),
        "fences_missing": fence_missing,
        "orphans": len(orphans),
        "hung": len(hung),
        "keys_left": len(keys_left),
        "strays": len(h.strays),
        "harness_errors": len(h.errors),
        "sigterm_exit70_runs": len(term_to_end),
        "sigterm_to_section_end_worst_ms": round(worst_end[0], 3) if worst_end else None,
        "sigterm_to_section_end_over_kill_after": sum(
            1 for x, _ in term_to_end if x > h.ka_ms + 20),
        "sigterm_to_next_start_worst_ms": round(worst_next[0], 3) if worst_next else None,
        "sigterm_after_next_start": sum(1 for x, _ in term_to_next if x < 0),
        "lease_broken_not_70": silent,
        "started_after_wait": len(overruns),
        "started_after_wait_worst_ms": round(worst_over[0], 1) if worst_over else None,
    }
    if h.topo.kind != "single":
        res["topology"] = h.topo.kind
        res["master_switches_seen"] = seen.get("master-switch", 0)
        res["failovers_asked"] = sum(
            1 for f in h.faults if f["kind"] in ("sentinel-failover", "cluster-failover")
            and not f.get("skipped") and not f.get("error"))
        res["failovers_asked_switched"] = sum(
            1 for f in h.faults if f["kind"] in ("sentinel-failover", "cluster-failover")
            and f.get("switched"))
        res["slot_migrations_troubled"] = sum(
            1 for f in h.faults if f["kind"] == "slot-migration" and f.get("trouble"))
    res["pass"] = (res["unreported_overlaps"] == 0 and res["fence_regressions"] == 0
                   and res["orphans"] == 0 and res["hung"] == 0
                   and res["started_after_wait"] == 0 and res["harness_errors"] == 0)
    detail = {
        "unreported_overlaps": unreported[:50],
        "reported_overlaps": reported[:50],
        "fence_regressions": fence_regr[:50],
        "orphans": orphans,
        "hung": hung,
        "keys_left": keys_left,
        "strays": h.strays,
        "harness_errors": h.errors[:50],
        "sigterm_to_section_end_worst": desc(worst_end[1]) if worst_end else None,
        "sigterm_to_next_start_worst": desc(worst_next[1]) if worst_next else None,
        "lease_broken_not_70": silent_list[:50],
        "started_after_wait": [dict(desc(s), wait_ms=s["run"].wait_ms,
                                    overrun_ms=round(x, 1)) for x, s in overruns[:50]],
    }
    return res, detail


def print_report(h, res, meta):
    a = h.args
    line = "-" * 72
    print(line)
    print(f"rlock chaos: {meta['rlock_version']}, {meta['binary']}; {meta['redis']}")
    print(f"  {a.duration:g} s, {a.locks} locks x {a.workers} workers, ttl {h.ttl_ms} ms, "
          f"kill-after {h.ka_ms} ms, faults every {a.fault_interval[0]:g}-"
          f"{a.fault_interval[1]:g} s, seed {a.seed}")
    print(line)

    def row(label, value, bad=None):
        mark = "" if bad is None else ("   FAIL" if bad else "   ok")
        print(f"{label:<36}{value}{mark}")

    row("runs (sections under the lock)", f"{res['runs']} ({res['sections']})")
    row("exit statuses", "  ".join(f"{k}: {v}" for k, v in res["exit_statuses"].items()))
    row("faults", "  ".join(f"{k} {v}" for k, v in sorted(res["faults"].items())) or "none")
    if res["faults_skipped_or_failed"]:
        row("faults skipped or failed", res["faults_skipped_or_failed"])
    if "topology" in res:
        row("master switches seen", f"{res['master_switches_seen']} (failovers asked for: "
            f"{res['failovers_asked']}, {res['failovers_asked_switched']} switched)")
        if res["slot_migrations_troubled"]:
            row("slot migrations that failed midway", f"{res['slot_migrations_troubled']} "
                "(finished by the harness; chaos.json: trouble)")
    def split(d):
        return (f"  (hold lost on the server: {d['hold lost on the server']},"
                f" other: {d['other']})")
    row("unreported overlaps", f"{res['unreported_overlaps']}"
        + split(res["unreported_overlaps_split"]), res["unreported_overlaps"] > 0)
    row("reported overlaps (70, or guardian)", f"{res['reported_overlaps']}"
        + split(res["reported_overlaps_split"]))
    if "topology" in res:
        for what in ("unreported", "reported"):
            near = res[f"{what}_overlaps_by_fault_near"]
            if near:
                row(f"  {what}: faults near", "  ".join(
                    f"{k} {v}" for k, v in sorted(near.items())))
    row("fence regressions", res["fence_regressions"], res["fence_regressions"] > 0)
    if res["fences_missing"]:
        row("sections without a numeric fence", res["fences_missing"])
    row("orphans", res["orphans"], res["orphans"] > 0)
    row("hung rlocks", res["hung"], res["hung"] > 0)
    if res["harness_errors"]:
        # A run the harness failed to follow is missing from every count.
        row("harness errors (runs lost)", res["harness_errors"], True)
    row("keys left (besides fences)", res["keys_left"])
    for k in h.keys_left_found[:5]:
        print(f"{'':<36}{k['key']} ({k['type']}, pttl {k['pttl_ms']} ms)")
    if res["strays"]:
        row("stray rlock processes", res["strays"])
    w = res["sigterm_to_section_end_worst_ms"]
    row("SIGTERM -> section end, worst",
        "-" if w is None else f"{w:.1f} ms over {res['sigterm_exit70_runs']} exit-70 runs"
        f" ({res['sigterm_to_section_end_over_kill_after']} above kill-after + 20 ms)")
    w = res["sigterm_to_next_start_worst_ms"]
    row("SIGTERM -> next holder, worst",
        "-" if w is None else f"{w:.1f} ms ({res['sigterm_after_next_start']} SIGTERMs after"
        " the next holder started; holds the server kept)")
    lb = res["lease_broken_not_70"]
    row("lease broken under it, not exit 70",
        "  ".join(f"{k}: {v}" for k, v in sorted(lb.items())) or "0")
    row("COMMAND late after --wait (>100 ms)",
        f"{res['started_after_wait']} (worst {res['started_after_wait_worst_ms']:.0f} ms late)"
        if res["started_after_wait"] else "0", res["started_after_wait"] > 0)
    print(line)
    print(f"result: {'PASS' if res['pass'] else 'FAIL'}   (details: {h.out}/chaos.json)")
