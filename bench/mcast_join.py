#!/usr/bin/env python3
"""Multicast joins: OpenSM 3.3.23 and ibsm as the SM of the same ibsim
fabric, one after the other in one run, flooded with MCMemberRecord joins
and leaves.

For each SM in turn (OpenSM first), on a fresh ibsim of the same net file:

  1. the SM on the first host, behind an LD_PRELOAD shim (bench/failover.py's
     madrec) that records every SMP it writes with its time; wait for
     SUBNET UP and for `saquery -c` to answer;
  2. `--clients` hosts spread over the fabric each run
     `ibsm sa join-flood --phase join --groups N --concurrency C --json` at
     once: every client creates-or-joins the same N groups (fixed MGIDs
     ff12:b0c4::<n>, no IPoIB signature), so each group ends with one
     member per client; no retries, an answer missing after `--timeout-ms`
     counts as lost;
  3. wait until the SM has written no MulticastForwardingTable block for
     `--quiet` seconds: the MFTs are done;
  4. the MFTs read back from every switch (`ibroute -M`, from a host no SM
     or client runs on): how many switches hold each group and how the
     groups spread over the spines (this, not the batching alone, decides
     how many MFT blocks a join touches);
  5. the same clients leave every group (`--phase leave`), and wait again.

Reported per SM and phase: answered per second over all clients (first
request of any client to the last answer of any), errors and losses,
latency (p50 of the median client, p99 of the worst), the MFT Sets and
Gets the SM wrote from the phase's first request until its MFTs went quiet,
per answered request, the time from the first request to the last MFT Set
(joins "through to the switches" per second), and ibsm's own count of the
Sets its multicast passes logged (`sets=`). OpenSM's log does not count its
MFT writes; the shim counts both SMs the same way. Then the ratios
ibsm/OpenSM.

ibsm runs with `[sa] max_mcast_groups_per_port = 1024`: its default bound
(256 groups per port, a join flood from one port fills only its share)
would refuse one client's 257th group; OpenSM has no such bound. Keep N
below ibsim's MulticastFDBCap (1024 MLIDs, one taken by the IPoIB
broadcast group) and clients + 2 within ibsim's 10 clients.

`--standby` adds a third run: ibsm again, with an ibsm standby (priority 0,
on a host no client uses) fed by the master's state stream (`[sa]
state_sync`) from before the flood: what the stream costs the master.
`--takeover` (with `--standby`) then SIGKILLs that master after the join
phase, in place of the leave phase: the standby takes over with the
master's last joins, and the MFT Gets and Sets it writes (the shim's
count), its log's multicast passes and `ibroute -M` on every switch
before and after show whether it rewrote or reread what the old master
left.

usage: bench/mcast_join.py [--fabric ft648] [--clients 4] [--groups 1000]
                           [--concurrency 16] [--ibsm target/release/ibsm]
                           [--standby [--takeover]]
"""
import argparse
import atexit
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.dont_write_bytecode = True  # no bench/__pycache__ from importing
sys.path.insert(0, HERE)
from bringup import UMAD2SIM, sim_env, start_ibsim, wait_attachable  # noqa: E402
from common import PROCS, fabric_files, fmt, kill_started_processes_on_exit, ratio  # noqa: E402
from failover import build_shim, line_time  # noqa: E402

FABRICS = {
    "ft648": "fattree2:radix=36,leaves=36,spines=18,hosts=18",
    "small": "fattree2:radix=8,leaves=4,spines=2,hosts=4",
}
MAX_CLIENTS = 8  # ibsim serves 10: the SM, the join clients, one diag
MAX_GROUPS = 1023  # ibsim's MulticastFDBCap (1024) less the broadcast group
ATTR_MFT, SET, GET = 0x1B, 0x02, 0x01
BRING_UP_CAP = 120.0
SETTLE_CAP = 300.0
IBSM_CONF = "[sa]\nmax_mcast_groups_per_port = 1024\n"

kill_started_processes_on_exit()


def run_diag(sock, host, work, *args, timeout=60):
    env = sim_env(sock, host, {"LD_PRELOAD": UMAD2SIM})
    r = subprocess.run(list(args), env=env, cwd=work, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def cpu_seconds(pid):
    """utime + stime of a process, in seconds (None once it is gone)."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def cpu_delta(a, b):
    return None if a is None or b is None else b - a


def smp_records(path):
    """Every SMP the SM wrote: (seconds, method, attribute), in order."""
    if not os.path.exists(path):
        return []
    data = open(path, "rb").read()
    return [(ns / 1e9, method, attr)
            for ns, _cls, method, attr, _ in struct.iter_unpack("<qBBHI", data[: len(data) // 16 * 16])]


def last_mft_set(path):
    sets = [t for t, m, a in smp_records(path) if m == SET and a == ATTR_MFT]
    return sets[-1] if sets else None


def mft_counts(path, t0, t1):
    """MFT Sets, MFT Gets and all SMPs written in [t0, t1]."""
    sets = gets = smps = 0
    for t, m, a in smp_records(path):
        if t0 <= t <= t1:
            smps += 1
            if a == ATTR_MFT:
                sets += m == SET
                gets += m == GET
    return sets, gets, smps


class Sm:
    def __init__(self, kind, host, sock, work, shim, ibsm, extra=()):
        self.kind = kind
        self.dir = os.path.join(work, kind)
        os.makedirs(self.dir, exist_ok=True)
        self.log = os.path.join(self.dir, "log")
        self.rec = os.path.join(self.dir, "smps.rec")
        cache = os.path.join(self.dir, "cache")
        os.makedirs(cache, exist_ok=True)
        env = sim_env(sock, host, {"LD_PRELOAD": f"{shim} {UMAD2SIM}", "MADREC_OUT": self.rec,
                                   "OSM_TMP_DIR": self.dir, "OSM_CACHE_DIR": cache})
        if kind == "opensm":
            cmd = ["opensm", "-d2", "-f", self.log]
        else:
            conf = os.path.join(self.dir, "ibsm.toml")
            with open(conf, "w") as f:
                f.write(IBSM_CONF)
            cmd = [ibsm, "run", "--config", conf, "--cache-dir", cache, "--log-file", self.log, *extra]
        out = open(os.path.join(self.dir, "stdout"), "w")
        self.started = time.time()
        self.proc = subprocess.Popen(cmd, env=env, cwd=self.dir, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        PROCS.append(self.proc)

    def text(self):
        try:
            return open(self.log, errors="replace").read()
        except FileNotFoundError:
            return ""

    def wait_up(self):
        deadline = time.time() + BRING_UP_CAP
        while time.time() < deadline:
            if "SUBNET UP" in self.text():
                return time.time() - self.started
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise SystemExit(f"{self.kind} did not bring the fabric up; log in {self.log}")

    def logged_mft_sets(self, t0, t1):
        """ibsm's own count: the `sets=` of its multicast passes logged in [t0, t1]."""
        n, seen = 0, False
        for line in self.text().splitlines():
            if "multicast forwarding programmed" not in line:
                continue
            t = line_time(line)
            m = re.search(r"\bsets=(\d+)", line)
            if t is not None and m and t0 <= t <= t1:
                n += int(m.group(1))
                seen = True
        return n if seen else None

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def mft_spread(sock, host, work):
    """Every switch's MFT as `ibroute -M` reads it: (switch-MLID entries,
    switches per MLID (mean), spines carrying any MLID, most MLIDs on one
    spine, MLIDs held)."""
    code, text = run_diag(sock, host, work, "ibnetdiscover", "-p")
    if code != 0:
        return None
    lids = sorted({int(line.split()[1]) for line in text.splitlines() if line.startswith("SW ")})
    per_mlid, per_spine, entries = {}, {}, 0
    for lid in lids:
        code, out = run_diag(sock, host, work, "ibroute", "-M", str(lid))
        if code != 0:
            return None
        name = re.search(r"\(([^)]*)\):", out)
        mlids = [int(m, 16) for m in re.findall(r"^(0x[0-9a-fA-F]{4})\s", out, re.M)]
        entries += len(mlids)
        for ml in mlids:
            per_mlid[ml] = per_mlid.get(ml, 0) + 1
        if name and "spine" in name.group(1) and mlids:
            per_spine[name.group(1)] = len(mlids)
    return {
        "entries": entries,
        "switches_per_mlid": entries / len(per_mlid) if per_mlid else None,
        "spines_used": len(per_spine),
        "max_on_a_spine": max(per_spine.values(), default=0),
        "mlids": len(per_mlid),
    }


def takeover(master, standby, sock, hosts, work, args, spread_before):
    """SIGKILL the master; the standby's MASTER, its multicast passes and
    MFT SMPs until they went quiet, and the MFTs compared."""
    t_kill = time.time()
    master.stop()
    deadline = t_kill + 120
    while "SUBNET UP" not in standby.text():
        if time.time() > deadline or standby.proc.poll() is not None:
            return {"error": f"the standby did not take over; log in {standby.log}"}
        time.sleep(0.05)
    up = time.time() - t_kill
    # Its multicast pass follows the SA's import of the copy, after SUBNET
    # UP: quiet is counted from then.
    last = wait_quiet(standby, time.time(), args.quiet)
    t1 = time.time()
    sets, gets, smps = mft_counts(standby.rec, t_kill, t1)
    passes = []
    for line in standby.text().splitlines():
        t = line_time(line)
        if "multicast forwarding programmed" in line and t is not None and t >= t_kill:
            passes.append({k: int(v) for k, v in re.findall(r"\b(reads|sets|vouched|failures)=(\d+)", line)})
    return {
        "subnet_up": up,
        "mft_sets": sets,
        "mft_gets": gets,
        "smps": smps,
        "settled": (last - t_kill) if last is not None else None,
        "passes": passes,
        "spread_before": spread_before,
        "spread_after": mft_spread(sock, hosts[-1], work),
        "current_copy": "a current copy of the old master's SA state: no ClientReregister" in standby.text(),
    }


def wait_sa(sock, host, work, cap=30.0):
    deadline = time.time() + cap
    while time.time() < deadline:
        if run_diag(sock, host, work, "saquery", "-c", timeout=30)[0] == 0:
            return
        time.sleep(0.2)
    raise SystemExit("the SA does not answer saquery -c")


def flood(sock, hosts, work, args, phase):
    """One `ibsm sa join-flood --phase <phase>` per host at once; their reports."""
    procs = []
    for i, host in enumerate(hosts):
        cwd = os.path.join(work, f"client-{i}")
        os.makedirs(cwd, exist_ok=True)
        cmd = [args.ibsm, "sa", "join-flood", "--phase", phase, "--groups", str(args.groups),
               "--concurrency", str(args.concurrency), "--timeout-ms", str(args.timeout_ms), "--json"]
        env = sim_env(sock, host, {"LD_PRELOAD": UMAD2SIM})
        p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        PROCS.append(p)
        procs.append(p)
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        # A client that printed its report and then died in libumad2sim's
        # exit path still measured its phase.
        try:
            reports.append(json.loads(out)[0])
        except (ValueError, IndexError):
            reports.append({"failed": f"exit {p.returncode}: {err.strip()[:300]}"})
    return reports


def combine(reports):
    ok = [r for r in reports if "failed" not in r]
    out = {"failed_clients": [r["failed"] for r in reports if "failed" in r]}
    if not ok:
        return out
    answered = [r for r in ok if r["answered"]]
    p50s = sorted(r["latency_ms"]["p50"] for r in answered)
    started = min(r["started_unix"] for r in ok)
    ended = max(r["ended_unix"] for r in ok)
    failures = {}
    for r in ok:
        for k, n in r["failures"].items():
            failures[k] = failures.get(k, 0) + n
    out.update({
        "clients": len(ok),
        "ops": sum(r["ops"] for r in ok),
        "answered": sum(r["answered"] for r in ok),
        "errors": sum(r["errors"] for r in ok),
        "lost": sum(r["lost"] for r in ok),
        "failures": failures,
        "started": started,
        "ended": ended,
        "per_s": sum(r["answered"] for r in ok) / max(ended - started, 1e-9),
        "p50": p50s[len(p50s) // 2] if p50s else None,
        "p99": max((r["latency_ms"]["p99"] for r in answered), default=None),
        "mlids": max(r["mlids"] for r in ok),
    })
    return out


def wait_quiet(sm, since, quiet):
    """Waits until the SM has written no MFT block for `quiet` s; returns
    the time of its last MFT Set after `since` (None: none)."""
    deadline = time.time() + SETTLE_CAP
    while time.time() < deadline:
        last = last_mft_set(sm.rec)
        ref = max(last or 0.0, since)
        if time.time() - ref >= quiet:
            return last if last is not None and last >= since else None
        time.sleep(0.2)
    return last_mft_set(sm.rec)


def bench_sm(kind, args, spec, hosts, shim, work):
    net, flags = args.net, args.flags
    sock = f"mcj{os.getpid()}{kind}"
    sim = start_ibsim(net, sock, flags, work)
    PROCS.append(sim)
    try:
        for h in hosts:
            wait_attachable(sock, h, work)
        standby = None
        if kind == "ibsm_standby":
            wait_attachable(sock, args.standby_host, work)
            sm = Sm(kind, hosts[0], sock, work, shim, args.ibsm, ("--priority", "10"))
        else:
            sm = Sm(kind, hosts[0], sock, work, shim, args.ibsm)
        r = {"bring_up": sm.wait_up()}
        wait_sa(sock, hosts[-1], work)
        if kind == "ibsm_standby":
            standby = Sm("standby", args.standby_host, sock, work, shim, args.ibsm, ("--priority", "0"))
            deadline = time.time() + 60
            while "copy of the master's SA state is current" not in standby.text():
                if time.time() > deadline or standby.proc.poll() is not None:
                    raise SystemExit(f"the standby's copy never became current; log in {standby.log}")
                time.sleep(0.1)
        time.sleep(2.0)  # the SM's first light sweep and its own groups settle
        clients = hosts[1:-1]
        phases = ("join",) if kind == "ibsm_standby" and args.takeover else ("join", "leave")
        for phase in phases:
            t0 = time.time()
            cpu0 = (cpu_seconds(sm.proc.pid), cpu_seconds(sim.pid))
            c = combine(flood(sock, clients, work, args, phase))
            last = wait_quiet(sm, c.get("started", t0), args.quiet)
            t1 = time.time()
            cpu1 = (cpu_seconds(sm.proc.pid), cpu_seconds(sim.pid))
            # CPU over the phase and its quiet wait (the wait costs little).
            c["sm_cpu"], c["ibsim_cpu"] = cpu_delta(cpu0[0], cpu1[0]), cpu_delta(cpu0[1], cpu1[1])
            start = c.get("started", t0)
            c["mft_sets"], c["mft_gets"], c["smps"] = mft_counts(sm.rec, start, t1)
            c["settled"] = (last - start) if last is not None else None
            # 0: the MFTs were done by the time the last answer arrived.
            c["tail"] = max(0.0, last - c["ended"]) if last is not None and "ended" in c else None
            c["logged_sets"] = sm.logged_mft_sets(start, t1) if kind != "opensm" else None
            r[phase] = c
            if phase == "join":
                r["spread"] = mft_spread(sock, hosts[-1], work)
            print(f"  {kind} {phase}: {fmt(c.get('per_s'), 0)}/s, {c.get('answered')} answered, "
                  f"{c.get('errors')} errors, {c.get('lost')} lost, {c['mft_sets']} MFT Sets", file=sys.stderr,
                  flush=True)
        r["running"] = sm.proc.poll() is None
        if standby is not None and args.takeover:
            r["takeover"] = takeover(sm, standby, sock, hosts, work, args, r.get("spread"))
        if standby is not None:
            r["standby_running"] = standby.proc.poll() is None
            r["standby_log"] = standby.text()
            standby.stop()
        sm.stop()
        return r
    finally:
        sim.kill()
        sim.wait()


def report(args, spec, res, load):
    o, i = res["opensm"], res["ibsm"]
    print(f"### {args.fabric}: {spec}; {args.clients} clients x {args.groups} groups, {args.concurrency} in flight "
          f"per client, timeout {args.timeout_ms} ms, no retries")
    print()
    for phase, verb in (("join", "joins"), ("leave", "leaves")):
        a, b = o[phase], i[phase]
        print(f"| {verb} | OpenSM | ibsm | ibsm/OpenSM |")
        print("|---|---|---|---|")

        def row(label, key, d, rat=True, src=None):
            x, y = (src or (lambda r: r.get(key)))(a), (src or (lambda r: r.get(key)))(b)
            print(f"| {label} | {fmt(x, d)} | {fmt(y, d)} | {ratio(y, x) if rat else ''} |")

        row(f"{verb} answered per second (all clients)", "per_s", 0)
        row("answered", "answered", 0, False)
        row("errors", "errors", 0, False)
        row("lost (timeouts)", "lost", 0, False)
        row("p50 latency (ms, median client)", "p50", 3)
        row("p99 latency (ms, worst client)", "p99", 3)
        row("MFT Sets", "mft_sets", 0)
        row("MFT Sets per answered request", None, 3,
            src=lambda r: r["mft_sets"] / r["answered"] if r.get("answered") else None)
        row("MFT Gets", "mft_gets", 0, False)
        row("first request to last MFT Set (s)", "settled", 2)
        row("last answer to last MFT Set (s)", "tail", 2)
        row(f"{verb} per second through to the MFTs", None, 0,
            src=lambda r: r["answered"] / r["settled"] if r.get("answered") and r.get("settled") else None)
        row("SM CPU s per 1000 answered", None, 3,
            src=lambda r: r["sm_cpu"] / r["answered"] * 1000 if r.get("answered") and r.get("sm_cpu") is not None
            else None)
        row("ibsim CPU s per 1000 answered", None, 3,
            src=lambda r: r["ibsim_cpu"] / r["answered"] * 1000
            if r.get("answered") and r.get("ibsim_cpu") is not None else None)
        print()
        for who, r in (("OpenSM", a), ("ibsm", b)):
            if r.get("failures") or r.get("failed_clients"):
                print(f"- {who} {phase} failures: {r.get('failures')} {r.get('failed_clients') or ''}")
        if b.get("logged_sets") is not None:
            print(f"- ibsm's multicast passes logged sets={b['logged_sets']} in the {phase} phase "
                  f"(the shim counted {b['mft_sets']})")
        print()
    so, si = o.get("spread"), i.get("spread")
    if so and si:
        print("| MFTs after the joins (`ibroute -M` on every switch) | OpenSM | ibsm |")
        print("|---|---|---|")
        print(f"| MLIDs held | {so['mlids']} | {si['mlids']} |")
        print(f"| switch-MLID entries | {so['entries']} | {si['entries']} |")
        print(f"| switches per group (mean) | {fmt(so['switches_per_mlid'], 2)} | {fmt(si['switches_per_mlid'], 2)} |")
        print(f"| spines carrying groups | {so['spines_used']} | {si['spines_used']} |")
        print(f"| most groups on one spine | {so['max_on_a_spine']} | {si['max_on_a_spine']} |")
        print()
    s = res.get("ibsm_standby")
    if s:
        print("| with an ibsm standby fed by the state stream | ibsm alone | ibsm + standby | ratio |")
        print("|---|---|---|---|")
        for phase, verb in (("join", "joins"), ("leave", "leaves")):
            if phase not in s:
                continue
            a, b = i[phase], s[phase]
            cpu = lambda r: r["sm_cpu"] / r["answered"] * 1000 if r.get("answered") and r.get("sm_cpu") else None
            print(f"| {verb} answered per second | {fmt(a.get('per_s'), 0)} | {fmt(b.get('per_s'), 0)} | "
                  f"{ratio(b.get('per_s'), a.get('per_s'))} |")
            print(f"| {verb}: master CPU s per 1000 answered | {fmt(cpu(a), 3)} | {fmt(cpu(b), 3)} | "
                  f"{ratio(cpu(b), cpu(a))} |")
            print(f"| {verb}: p99 latency (ms) | {fmt(a.get('p99'), 3)} | {fmt(b.get('p99'), 3)} | "
                  f"{ratio(b.get('p99'), a.get('p99'))} |")
            print(f"| {verb}: lost | {a.get('lost')} | {b.get('lost')} | |")
        print(f"\nstandby running at the end: {s.get('standby_running')}; "
              f"master running: {s['running']}")
        print()
    t = (s or {}).get("takeover")
    if t:
        print("| the master SIGKILLed after the joins: the standby takes over | |")
        print("|---|---|")
        if t.get("error"):
            print(f"| error | {t['error']} |")
        else:
            b, a = t.get("spread_before") or {}, t.get("spread_after") or {}
            print(f"| kill to the standby's SUBNET UP (s) | {fmt(t['subnet_up'], 2)} |")
            print(f"| took over with a current copy (no ClientReregister) | {t['current_copy']} |")
            print(f"| MFT Gets / Sets by the new master (shim) | {t['mft_gets']} / {t['mft_sets']} |")
            print(f"| SMPs by the new master until its MFT Sets went quiet | {t['smps']} |")
            print(f"| its multicast passes (reads, sets, switches vouched for) | "
                  f"{', '.join(str((p.get('reads'), p.get('sets'), p.get('vouched'))) for p in t['passes'])} |")
            print(f"| MLIDs held / switch-MLID entries before | {b.get('mlids')} / {b.get('entries')} |")
            print(f"| MLIDs held / switch-MLID entries after | {a.get('mlids')} / {a.get('entries')} |")
        print()
    print(f"bring-up: OpenSM {fmt(o['bring_up'], 2)} s, ibsm {fmt(i['bring_up'], 2)} s; "
          f"both SMs running at the end: {o['running'] and i['running']}; load average before/after: "
          f"{load[0]:.2f} / {load[1]:.2f}")
    print()
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fabric", default="ft648")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--timeout-ms", type=int, default=1000)
    ap.add_argument("--quiet", type=float, default=3.0, help="seconds without MFT Sets that end a phase")
    ap.add_argument("--ibsm", default=os.path.join(ROOT, "target", "release", "ibsm"))
    ap.add_argument("--standby", action="store_true", help="also ibsm with an ibsm standby fed by the state stream")
    ap.add_argument("--takeover", action="store_true",
                    help="with --standby: SIGKILL the master after the joins; what the standby writes")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    args = ap.parse_args()
    if args.takeover and not args.standby:
        raise SystemExit("--takeover needs --standby")
    args.ibsm = os.path.abspath(args.ibsm)
    if not 1 <= args.clients <= MAX_CLIENTS:
        raise SystemExit(f"ibsim serves 10 clients: 1 to {MAX_CLIENTS} join clients")
    if not 1 <= args.groups <= MAX_GROUPS:
        raise SystemExit(f"ibsim's switches hold 1024 MLIDs, one the broadcast group's: 1 to {MAX_GROUPS} groups")
    if args.concurrency > 256:
        raise SystemExit("keep windows on ibsim at 256 or below (libumad2sim can deadlock above)")
    spec = FABRICS.get(args.fabric, args.fabric)
    work = tempfile.mkdtemp(prefix="ibsm-mcast-join-")
    if not args.keep:
        atexit.register(shutil.rmtree, work, True)
    else:
        print(f"work directory {work}", file=sys.stderr)
    args.net, args.flags, all_hosts, _ = fabric_files(spec, args.ibsm, work)
    if len(all_hosts) < args.clients + 3:
        raise SystemExit(f"{spec} has {len(all_hosts)} hosts; needs {args.clients + 3}")
    # The SM on the first host, clients spread over the fabric, the diag last.
    step = max(1, (len(all_hosts) - 2) // args.clients)
    hosts = [all_hosts[0]] + [all_hosts[1 + k * step] for k in range(args.clients)] + [all_hosts[-1]]
    args.standby_host = all_hosts[-2]
    if args.standby and args.standby_host in hosts:
        raise SystemExit("no host left for the standby")
    shim = build_shim(work)
    load0 = os.getloadavg()[0]
    t0 = time.time()
    kinds = ("opensm", "ibsm") + (("ibsm_standby",) if args.standby else ())
    res = {kind: bench_sm(kind, args, spec, hosts, shim, work) for kind in kinds}
    report(args, spec, res, (load0, os.getloadavg()[0]))
    print(f"total run time {time.time() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
