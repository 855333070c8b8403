#!/usr/bin/env python3
"""SA under load: OpenSM's SA and ibsm's, flooded on the same ibsim fabric in
one run, plus ibsm's in-process.

For each SM in turn (OpenSM 3.3.23 first, then ibsm, on the same host of one
ibsim, ibsm keeping OpenSM's LIDs):

  1. the SM brings the fabric up; `saquery -c` waits for its SA;
  2. `--clients` processes on as many other hosts each run
     `ibsm sa flood --kind path --concurrency N --duration D --json` at once:
     SubnAdmGet(PathRecord) for random host pairs (one pairs file, seeded),
     N in flight per client, no retries, a query unanswered after
     `--timeout-ms` counted as lost;
  3. one client floods `--kind nodes` (GetTable NodeRecord, the whole table
     each time): ibsm answers it with RMPP; OpenSM's answer reaches a client
     on ibsim cut to its first MAD with no RMPP header (ibsim has no kernel
     to segment it), which the client reports as an error, as it is;
  4. ibsm only: its sweeps while flooded. It runs with `--sweep-interval 1`
     and its Prometheus endpoint; light and heavy sweep counts
     (`ibsm_sweeps_total`) are read over an idle window and over the flood
     window of the same length;
  5. fairness: the other clients ask one PathRecord at a time, first alone,
     then while the first client floods with 256 in flight (the most an
     ibsim window holds); their rate and latency in both, the flooder's
     rate, and ibsm's SA drops in that window.

Reported per SM: answered queries per second (all clients), lost, errors,
p50 (median of the clients' p50s) and p99 (the worst client's), the SM
process's CPU time per 1000 answers, and the ratios ibsm/OpenSM. Then
`ibsm sa flood --sim <fabric>`: ibsm's runtime and a client in one process,
no ibsim in between (the SA's own ceiling).

usage: bench/sa_load.py [--fabric ft648] [--clients 6] [--concurrency 16]
                        [--duration 10] [--ibsm target/release/ibsm]
"""
import argparse
import atexit
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.dont_write_bytecode = True  # no bench/__pycache__ from importing bringup
sys.path.insert(0, HERE)
from bringup import UMAD2SIM, sim_env, start_ibsim, wait_attachable  # noqa: E402
from common import PROCS, fabric_files, fmt, kill_started_processes_on_exit, ratio  # noqa: E402

FABRICS = {
    "ft648": "fattree2:radix=36,leaves=36,spines=18,hosts=18",
    "small": "fattree2:radix=8,leaves=4,spines=2,hosts=4",
}
# ibsim serves at most 10 clients: the SM, the flood clients, one diag.
MAX_CLIENTS = 8
PAIRS = 20000
METRICS = "127.0.0.1:9477"
BRING_UP_CAP = 120.0

kill_started_processes_on_exit()


def run_diag(sock, host, work, *args, timeout=120):
    env = sim_env(sock, host, {"LD_PRELOAD": UMAD2SIM})
    r = subprocess.run(list(args), env=env, cwd=work, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def ca_lids(sock, host, work):
    return sorted(set(ca_lid_by_name(sock, host, work).values()))


def ca_lid_by_name(sock, host, work):
    """{host name: LID} of every CA port, from `ibnetdiscover -p`."""
    code, text = run_diag(sock, host, work, "ibnetdiscover", "-p")
    if code != 0:
        raise SystemExit(f"ibnetdiscover failed: {text[:300]}")
    out = {}
    for line in text.splitlines():
        if line.startswith("CA "):
            m = re.search(r"\( '([^']*)'", line)
            if m:
                out[m.group(1)] = int(line.split()[1])
    return out


def write_pairs(lids, path, n, seed=1):
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(n):
            a, b = rng.sample(lids, 2)
            f.write(f"{a} {b}\n")


def cpu_seconds(pid):
    """utime + stime of a process, in seconds (None once it is gone)."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def thread_cpu(pid):
    """{thread name: utime + stime in seconds} of a process's threads."""
    out = {}
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                comm, rest = open(f"/proc/{pid}/task/{tid}/stat").read().split("(", 1)[1].rsplit(")", 1)
                fields = rest.split()
                out[comm] = out.get(comm, 0) + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            except (OSError, IndexError, ValueError):
                continue
    except OSError:
        pass
    return out


def metrics(addr):
    """{(name, labels): value} of ibsm's Prometheus endpoint."""
    try:
        text = urllib.request.urlopen(f"http://{addr}/metrics", timeout=5).read().decode()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        m = re.match(r'^(\w+)(\{[^}]*\})? ([0-9.eE+-]+)$', line)
        if m:
            out[(m.group(1), m.group(2) or "")] = float(m.group(3))
    return out


def answer_buckets(before, after):
    """{upper bound in ms: answers} of ibsm_sa_answer_seconds between two
    scrapes: how long the SM itself held each answer (its queue included),
    apart from ibsim's and the client's part of the latency."""
    cum = {}
    for (name, labels), v in after.items():
        if name == "ibsm_sa_answer_seconds_bucket":
            le = re.search(r'le="([^"]+)"', labels).group(1)
            cum[float(le) if le != "+Inf" else float("inf")] = v - before.get((name, labels), 0)
    out, prev = {}, 0
    for le in sorted(cum):
        if cum[le] - prev:
            out[le * 1000] = cum[le] - prev
        prev = cum[le]
    return out


def sweeps(m):
    return (m.get(("ibsm_sweeps_total", '{kind="light"}'), 0), m.get(("ibsm_sweeps_total", '{kind="heavy"}'), 0))


class Sm:
    def __init__(self, kind, host, sock, work, cache, ibsm):
        self.kind = kind
        self.dir = os.path.join(work, kind)
        os.makedirs(self.dir, exist_ok=True)
        self.log = os.path.join(self.dir, "log")
        env = sim_env(sock, host, {"LD_PRELOAD": UMAD2SIM, "OSM_TMP_DIR": self.dir, "OSM_CACHE_DIR": cache})
        if kind == "opensm":
            cmd = ["opensm", "-d2", "-f", self.log]
        else:
            cmd = [ibsm, "run", "--cache-dir", cache, "--log-file", self.log, "--sweep-interval", "1",
                   "--metrics-listen", METRICS]
        out = open(os.path.join(self.dir, "stdout"), "w")
        self.started = time.time()
        self.proc = subprocess.Popen(cmd, env=env, cwd=self.dir, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        PROCS.append(self.proc)

    def wait_up(self, cap=BRING_UP_CAP):
        deadline = time.time() + cap
        while time.time() < deadline:
            try:
                if "SUBNET UP" in open(self.log, errors="replace").read():
                    return time.time() - self.started
            except FileNotFoundError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise SystemExit(f"{self.kind} did not bring the fabric up; log in {self.log}")

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def wait_sa(sock, host, work, cap=20.0):
    deadline = time.time() + cap
    while time.time() < deadline:
        code, _ = run_diag(sock, host, work, "saquery", "-c", timeout=30)
        if code == 0:
            return
        time.sleep(0.1)
    raise SystemExit("the SA does not answer saquery -c")


def flood(sock, hosts, work, ibsm, kind, concurrency, duration, pairs, timeout_ms, each_once=False):
    """Runs one `ibsm sa flood` per host at once; returns their JSON reports.
    `pairs`: one pairs file for all, or a list of one per host."""
    procs = flood_start(sock, hosts, work, ibsm, kind, concurrency, duration, pairs, timeout_ms, each_once)
    return flood_collect(procs, duration)


def flood_start(sock, hosts, work, ibsm, kind, concurrency, duration, pairs, timeout_ms, each_once=False, tag=""):
    """Starts one `ibsm sa flood` per host; `flood_collect` reads them."""
    procs = []
    for i, host in enumerate(hosts):
        cwd = os.path.join(work, f"flood-{kind}{tag}-{i}")
        os.makedirs(cwd, exist_ok=True)
        cmd = [ibsm, "sa", "flood", "--kind", kind, "--concurrency", str(concurrency), "--duration", str(duration),
               "--timeout-ms", str(timeout_ms), "--json"]
        if kind == "path":
            cmd += ["--pairs-file", pairs[i] if isinstance(pairs, list) else pairs]
        if each_once:
            cmd += ["--each-once"]
        env = sim_env(sock, host, {"LD_PRELOAD": UMAD2SIM})
        p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        PROCS.append(p)
        procs.append(p)
    return procs


def flood_collect(procs, duration):
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=duration + 120)
        # A client that printed its report and then died in libumad2sim's
        # exit path (a MAD arriving after close) still measured the flood.
        try:
            reports.append(json.loads(out))
        except ValueError:
            reports.append({"failed": f"exit {p.returncode}: {err.strip()[:300]}"})
    return reports


def combine(reports):
    ok = [r for r in reports if "failed" not in r]
    if not ok:
        return {"failed": [r["failed"] for r in reports]}
    p50s = sorted(r["latency_ms"]["p50"] for r in ok if r["answered"])
    return {
        "clients": len(ok),
        "answered": sum(r["answered"] for r in ok),
        "sent": sum(r["sent"] for r in ok),
        "lost": sum(r["lost"] for r in ok),
        "errors": sum(r["errors"] for r in ok),
        "qps": sum(r["qps"] for r in ok),
        "p50": p50s[len(p50s) // 2] if p50s else None,
        "p99": max((r["latency_ms"]["p99"] for r in ok if r["answered"]), default=None),
        "max": max((r["latency_ms"]["max"] for r in ok if r["answered"]), default=None),
        "last_answer_s": max(r["elapsed_s"] for r in ok),
        "records": (min(r["records_min"] for r in ok), max(r["records_max"] for r in ok)),
        "failures": {k: sum(r["failures"].get(k, 0) for r in ok) for r in ok for k in r["failures"]},
        "failed_clients": [r["failed"] for r in reports if "failed" in r],
    }


def bench_sm(kind, args, sock, hosts, work, cache, pairs):
    sm_host, diag_host = hosts[0], hosts[-1]
    flood_hosts = hosts[1:1 + args.clients]
    sm = Sm(kind, sm_host, sock, work, cache, args.ibsm)
    r = {"bring_up": sm.wait_up()}
    wait_sa(sock, diag_host, work)
    if not os.path.exists(pairs):
        write_pairs(ca_lids(sock, diag_host, work), pairs, PAIRS)
    time.sleep(1.0)
    if kind == "ibsm":
        m0 = metrics(METRICS)
        time.sleep(args.duration)
        m1 = metrics(METRICS)
        r["idle_sweeps"] = tuple(b - a for a, b in zip(sweeps(m0), sweeps(m1)))
        m_before = m1
    cpu0, t0 = cpu_seconds(sm.proc.pid), time.time()
    threads0 = thread_cpu(sm.proc.pid)
    perf = None
    if kind == "ibsm" and getattr(args, "perf", None):
        perf = subprocess.Popen(["perf", "record", "-F", "1999", "-g", "-p", str(sm.proc.pid), "-o", args.perf, "--",
                                 "sleep", str(min(5.0, args.duration / 2))],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r["path"] = combine(flood(sock, flood_hosts, work, args.ibsm, "path", args.concurrency, args.duration, pairs,
                              args.timeout_ms))
    cpu1, t1 = cpu_seconds(sm.proc.pid), time.time()
    threads1 = thread_cpu(sm.proc.pid)
    if perf is not None:
        perf.wait()
    r["threads"] = {k: v - threads0.get(k, 0) for k, v in threads1.items() if v - threads0.get(k, 0) > 0}
    if kind == "ibsm":
        m_after = metrics(METRICS)
        r["flood_sweeps"] = tuple(b - a for a, b in zip(sweeps(m_before), sweeps(m_after)))
        r["sa_drops"] = {re.sub(r'.*what="([^"]*)".*', r"\1", k[1]): v for k, v in m_after.items()
                         if k[0] == "ibsm_sa_events_total" and 'kind="drop"' in k[1] and v}
    if cpu0 is not None and cpu1 is not None:
        r["cpu_s"] = cpu1 - cpu0
        r["cpu_share"] = (cpu1 - cpu0) / max(t1 - t0, 1e-9)
    # An MPI start-up: every client resolves its path to every CA once,
    # all at once.
    storm_pairs = []
    for i, host in enumerate(flood_hosts):
        path = os.path.join(work, f"storm-{i}")
        if not os.path.exists(path):
            lids = ca_lid_by_name(sock, diag_host, work)
            own = lids[host]
            with open(path, "w") as f:
                for lid in sorted(set(lids.values()) - {own}):
                    f.write(f"{own} {lid}\n")
        storm_pairs.append(path)
    cpu0 = cpu_seconds(sm.proc.pid)
    h0 = metrics(METRICS) if kind == "ibsm" else {}
    r["storm"] = combine(flood(sock, flood_hosts, work, args.ibsm, "path", args.concurrency, 120, storm_pairs,
                               args.timeout_ms, each_once=True))
    cpu1 = cpu_seconds(sm.proc.pid)
    if cpu0 is not None and cpu1 is not None:
        r["storm"]["cpu_s"] = cpu1 - cpu0
    if kind == "ibsm":
        # /metrics is rendered at most once a second and reused meanwhile.
        time.sleep(2.5)
        r["storm"]["sa_inside"] = answer_buckets(h0, metrics(METRICS))
    # One query at a time: the SA's answer time with nothing queued.
    r["path1"] = combine(flood(sock, flood_hosts[:1], work, args.ibsm, "path", 1, min(args.duration, 5.0), pairs,
                               args.timeout_ms))
    r["nodes"] = combine(flood(sock, flood_hosts[:1], work, args.ibsm, "nodes", 4, min(args.duration, 5.0), pairs,
                               args.timeout_ms))
    r["fair"] = fairness(sm, kind, args, sock, flood_hosts, work, pairs)
    r["running"] = sm.proc.poll() is None
    sm.stop()
    return r


FLOODER_IN_FLIGHT = 256


def fairness(sm, kind, args, sock, flood_hosts, work, pairs):
    """One client floods with FLOODER_IN_FLIGHT queries in flight (the most
    an ibsim window holds) while the others ask one at a time: what the
    others get, beside what they get alone."""
    flooder, others = flood_hosts[0], flood_hosts[1:]
    span = min(args.duration, 5.0)
    alone = combine(flood(sock, others, work, args.ibsm, "path", 1, span, pairs, args.timeout_ms))
    d0 = metrics(METRICS) if kind == "ibsm" else {}
    cpu0 = cpu_seconds(sm.proc.pid)
    big = flood_start(sock, [flooder], work, args.ibsm, "path", FLOODER_IN_FLIGHT, span + 1.0, pairs,
                      args.timeout_ms, tag="-flooder")
    time.sleep(0.5)
    small = combine(flood(sock, others, work, args.ibsm, "path", 1, span, pairs, args.timeout_ms))
    loud = combine(flood_collect(big, span + 1.0))
    cpu1 = cpu_seconds(sm.proc.pid)
    out = {"alone": alone, "flooded": small, "flooder": loud}
    if cpu0 is not None and cpu1 is not None:
        out["cpu_s"] = cpu1 - cpu0
    if kind == "ibsm":
        time.sleep(2.5)
        d1 = metrics(METRICS)
        out["drops"] = {re.sub(r'.*what="([^"]*)".*', r"\1", k[1]): v - d0.get(k, 0) for k, v in d1.items()
                        if k[0] == "ibsm_sa_events_total" and 'kind="drop"' in k[1] and v - d0.get(k, 0)}
    return out


def sim_figure(args, spec):
    cmd = [args.ibsm, "sa", "flood", "--sim", spec, "--concurrency", str(args.concurrency * args.clients),
           "--duration", str(args.duration), "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.duration + 300)
    if p.returncode != 0:
        return {"failed": p.stderr.strip()[:300]}
    return json.loads(p.stdout)


def chosen_others(args):
    return range(args.clients - 1)


def report(name, spec, args, res, sim):
    o, i = res["opensm"], res["ibsm"]
    op, ip = o["path"], i["path"]
    print(f"### {name}: {spec}; {args.clients} clients x {args.concurrency} in flight, {args.duration:g} s, "
          f"timeout {args.timeout_ms} ms, no retries")
    print()
    print("| PathRecord Get | OpenSM | ibsm | ibsm/OpenSM |")
    print("|---|---|---|---|")
    for label, key, d in [("answered per second", "qps", 0), ("answered", "answered", 0), ("lost (timeouts)", "lost", 0),
                          ("errors", "errors", 0), ("p50 latency (ms, median client)", "p50", 3),
                          ("p99 latency (ms, worst client)", "p99", 3)]:
        a, b = op.get(key), ip.get(key)
        print(f"| {label} | {fmt(a, d)} | {fmt(b, d)} | {ratio(b, a) if key in ('qps', 'p50', 'p99') else ''} |")
    co = o.get("cpu_s") / max(op.get("answered", 0), 1) * 1000 if o.get("cpu_s") is not None else None
    ci = i.get("cpu_s") / max(ip.get("answered", 0), 1) * 1000 if i.get("cpu_s") is not None else None
    print(f"| SM CPU s per 1000 answers | {fmt(co, 3)} | {fmt(ci, 3)} | {ratio(ci, co)} |")
    print(f"| SM CPU share during the flood | {fmt(o.get('cpu_share'), 2)} | {fmt(i.get('cpu_share'), 2)} | |")
    for who, rr in (("OpenSM", o), ("ibsm", i)):
        per = sorted(rr.get("threads", {}).items(), key=lambda kv: -kv[1])
        answered = max(rr.get("path", {}).get("answered", 0), 1)
        cells = ", ".join(f"{k} {v / answered * 1e6:.1f}" for k, v in per)
        print(f"| {who} CPU µs per answer by thread | {cells} | | |")
    o1, i1 = o["path1"], i["path1"]
    print(f"| one client, 1 in flight: answered per second | {fmt(o1.get('qps'), 0)} | {fmt(i1.get('qps'), 0)} "
          f"| {ratio(i1.get('qps'), o1.get('qps'))} |")
    print(f"| one client, 1 in flight: p50 latency (ms) | {fmt(o1.get('p50'), 3)} | {fmt(i1.get('p50'), 3)} "
          f"| {ratio(i1.get('p50'), o1.get('p50'))} |")
    print()
    os_, is_ = o["storm"], i["storm"]
    print(f"| MPI start-up storm ({is_.get('clients')} clients x every CA, {args.concurrency} in flight each) "
          f"| OpenSM | ibsm | ibsm/OpenSM |")
    print("|---|---|---|---|")
    for label, key, d in [("queries", "sent", 0), ("answered", "answered", 0), ("lost (timeouts)", "lost", 0),
                          ("errors", "errors", 0), ("time to the last answer (s, slowest client)", "last_answer_s", 3),
                          ("p50 latency (ms, median client)", "p50", 3), ("p99 latency (ms, worst client)", "p99", 3),
                          ("max latency (ms)", "max", 3)]:
        a, b = os_.get(key), is_.get(key)
        print(f"| {label} | {fmt(a, d)} | {fmt(b, d)} | "
              f"{ratio(b, a) if key in ('last_answer_s', 'p50', 'p99', 'max') else ''} |")
    so = os_.get("cpu_s") / max(os_.get("answered", 0), 1) * 1e6 if os_.get("cpu_s") is not None else None
    si = is_.get("cpu_s") / max(is_.get("answered", 0), 1) * 1e6 if is_.get("cpu_s") is not None else None
    print(f"| SM CPU µs per answer | {fmt(so, 1)} | {fmt(si, 1)} | {ratio(si, so)} |")
    inside = ", ".join(f"≤{le:g} ms: {n:.0f}" for le, n in sorted(is_.get("sa_inside", {}).items()))
    print(f"| ibsm: answers by time inside the SM (ibsm_sa_answer_seconds) | | {inside} | |")
    print()
    on, inn = o["nodes"], i["nodes"]
    print("| GetTable NodeRecord (1 client x 4) | OpenSM | ibsm |")
    print("|---|---|---|")
    print(f"| whole tables per second | {fmt(on.get('qps'))} | {fmt(inn.get('qps'))} |")
    print(f"| records per answer | {on.get('records')} | {inn.get('records')} |")
    print(f"| p99 latency (ms) | {fmt(on.get('p99'), 3)} | {fmt(inn.get('p99'), 3)} |")
    print(f"| errors | {on.get('errors')} {dict(on.get('failures', {}))} | {inn.get('errors')} "
          f"{dict(inn.get('failures', {}))} |")
    print()
    fo, fi = o["fair"], i["fair"]
    print(f"| One client floods ({FLOODER_IN_FLIGHT} in flight), {len(chosen_others(args))} others ask one at a time "
          f"| OpenSM | ibsm | ibsm/OpenSM |")
    print("|---|---|---|---|")
    for label, part, key, d in [("others alone: answered per second (all)", "alone", "qps", 0),
                                ("others alone: p50 / p99 latency (ms)", "alone", ("p50", "p99"), 3),
                                ("others while flooded: answered per second (all)", "flooded", "qps", 0),
                                ("others while flooded: p50 latency (ms, median client)", "flooded", "p50", 3),
                                ("others while flooded: p99 latency (ms, worst client)", "flooded", "p99", 3),
                                ("others while flooded: max latency (ms)", "flooded", "max", 3),
                                ("others while flooded: lost", "flooded", "lost", 0),
                                ("flooder: answered per second", "flooder", "qps", 0),
                                ("flooder: lost", "flooder", "lost", 0)]:
        if isinstance(key, tuple):
            a = " / ".join(fmt(fo[part].get(k), d) for k in key)
            b = " / ".join(fmt(fi[part].get(k), d) for k in key)
            print(f"| {label} | {a} | {b} | |")
            continue
        a, b = fo[part].get(key), fi[part].get(key)
        print(f"| {label} | {fmt(a, d)} | {fmt(b, d)} | {ratio(b, a) if key in ('qps', 'p50', 'p99', 'max') else ''} |")
    print(f"| ibsm: SA drops during the flood | | {fi.get('drops') or 'none'} | |")
    print()
    print(f"ibsm sweeps (light, heavy) with --sweep-interval 1: idle {args.duration:g} s {i.get('idle_sweeps')}, "
          f"flooded {args.duration:g} s {i.get('flood_sweeps')}; SA drops: {i.get('sa_drops') or 'none'}")
    print(f"bring-up: OpenSM {fmt(o['bring_up'], 2)} s, ibsm {fmt(i['bring_up'], 2)} s; "
          f"both SMs running at the end: {o['running'] and i['running']}")
    for who, r in (("OpenSM", op), ("ibsm", ip)):
        if r.get("failures") or r.get("failed_clients"):
            print(f"- {who} path failures: {r.get('failures')} {r.get('failed_clients') or ''}")
    print()
    if sim is not None:
        if "failed" in sim:
            print(f"in-process (ibsm only): failed: {sim['failed']}")
        else:
            print(f"in-process (ibsm only, `ibsm sa flood --sim`, {sim['concurrency']} in flight, "
                  f"{sim['elapsed_s']:.1f} s): {sim['qps']:.0f} PathRecords/s, {sim['lost']} lost, "
                  f"{sim['errors']} errors, p50 {sim['latency_ms']['p50']:.3f} ms, p99 {sim['latency_ms']['p99']:.3f} ms")
        print()
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fabric", default="ft648")
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--timeout-ms", type=int, default=1000)
    ap.add_argument("--no-sim", action="store_true", help="skip the in-process figure")
    ap.add_argument("--ibsm", default=os.path.join(ROOT, "target", "release", "ibsm"))
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    ap.add_argument("--perf", metavar="FILE", help="perf record -g the ibsm SM for 5 s of its flood into FILE")
    args = ap.parse_args()
    args.ibsm = os.path.abspath(args.ibsm)
    if args.clients > MAX_CLIENTS:
        raise SystemExit(f"ibsim serves 10 clients: at most {MAX_CLIENTS} flood clients")
    spec = FABRICS.get(args.fabric, args.fabric)
    work = tempfile.mkdtemp(prefix="ibsm-sa-load-")
    if not args.keep:
        atexit.register(shutil.rmtree, work, True)
    net, flags, hosts, _ = fabric_files(spec, args.ibsm, work)
    if len(hosts) < args.clients + 2:
        raise SystemExit(f"{spec} has {len(hosts)} hosts; needs {args.clients + 2}")
    # Flood clients spread over the fabric, not all on the SM's leaf.
    step = max(1, (len(hosts) - 2) // args.clients)
    chosen = [hosts[0]] + [hosts[1 + k * step] for k in range(args.clients)] + [hosts[-1]]
    sock = f"saload{os.getpid()}"
    sim = start_ibsim(net, sock, flags, work)
    PROCS.append(sim)
    for h in chosen:
        wait_attachable(sock, h, work)
    cache = os.path.join(work, "cache")
    os.makedirs(cache, exist_ok=True)
    res = {}
    t0 = time.time()
    for kind in ("opensm", "ibsm"):
        res[kind] = bench_sm(kind, args, sock, chosen, work, cache, os.path.join(work, "pairs"))
        print(f"  [{time.time() - t0:5.0f} s] {kind}: {fmt(res[kind]['path'].get('qps'), 0)} PathRecords/s",
              file=sys.stderr, flush=True)
    sim.kill()
    sim.wait()
    figure = None if args.no_sim else sim_figure(args, spec)
    report(args.fabric, spec, args, res, figure)
    print(f"total run time {time.time() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
