#!/usr/bin/env python3
"""Fabric events: what OpenSM and ibsm spend reacting to a change, on the
same ibsim fabric, in one run.

For each SM in turn a fresh ibsim runs the fabric and the SM runs as a
daemon with periodic sweeps off (`opensm -s 0`, `ibsm run --sweep-interval
0`), so only the traps ibsim sends on a link change start a reaction. Once
the subnet is up and quiet, each scenario drives ibsim's console (Unlink,
ReLink), or sends the SM SIGHUP (a heavy sweep of an unchanged fabric, for
both SMs), and waits until the SM has sent nothing for --quiet seconds. It
reports, per scenario and SM:

- SMPs sent reacting: every SMP the SM wrote between the console command
  and the end of the quiet period, counted by bench/madcount.c (an
  LD_PRELOAD shim in front of libumad2sim, the same for both SMs, read live
  through a shared counter file);
- time from the command to the last SMP (the last Set, or the last read
  when a reaction needed no Set), and from the SM's first TrapRepress
  (the first trap it took in: ibsim takes milliseconds to send it) to
  its last SMP, both timed by the shim;
- LFT blocks and PortInfo Sets sent;
- SA latency while it reacts: a probe client on another host asks a
  PathRecord, waits --probe-pace ms after each answer, and keeps on from
  half a second before the command to the end of the quiet period
  (`ibsm sa flood --concurrency 1 --pace-ms`, the same client for both
  SMs): p50 and max of its answers, and any it lost.

Then the daemon stops and `ibsm run --once` starts on the fabric as it was
left: on the same host with its cache directory (a restart) and on another
host (after OpenSM: on OpenSM's host), counting what it sends.

usage: bench/events.py [--spec fattree2:radix=36,leaves=36,spines=18,hosts=18]
                       [--ibsm target/release/ibsm] [--quiet 3]
"""
import argparse
import json
import os
import random
import re
import signal
import shutil
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

UMAD2SIM = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ATTR = {16: "NodeDescription", 17: "NodeInfo", 18: "SwitchInfo", 20: "GUIDInfo", 21: "PortInfo", 22: "P_KeyTable",
        23: "SLtoVL", 24: "VLArb", 25: "LFT", 27: "MFT", 32: "SMInfo"}


def sim_env(sock, host, extra=None):
    env = dict(os.environ)
    env.update({"IBSIM_SOCKNAME": sock, "SIM_HOST": host})
    env.update(extra or {})
    return env


def build_shim(work):
    so = os.path.join(work, "madcount.so")
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", so, os.path.join(HERE, "madcount.c"), "-ldl",
                    "-lpthread"], check=True)
    return so


LIVE_COUNTERS = 256 * 64


def read_live(path):
    """SMPs sent so far: {(method, attr): n}."""
    try:
        data = open(path, "rb").read()
    except FileNotFoundError:
        return {}
    out = {}
    for i, (n,) in enumerate(struct.iter_unpack("<Q", data[:LIVE_COUNTERS * 8])):
        if n:
            out[(i // 64, i % 64)] = n
    return out


def read_times(path):
    """(last SMP, first TrapRepress since `clear_first_repress`), CLOCK_MONOTONIC ns (0: none)."""
    try:
        with open(path, "rb") as f:
            f.seek(LIVE_COUNTERS * 8)
            return struct.unpack("<QQ", f.read(16))
    except (FileNotFoundError, struct.error):
        return 0, 0


def clear_first_repress(path):
    with open(path, "r+b") as f:
        f.seek((LIVE_COUNTERS + 1) * 8)
        f.write(bytes(8))


def total(counts):
    return sum(counts.values())


def diff(after, before):
    return {k: n - before.get(k, 0) for k, n in after.items() if n - before.get(k, 0)}


def wait_quiet(live, quiet, limit=120.0):
    """Waits until no SMP was sent for `quiet` s; returns (counts, time of the last change)."""
    last = read_live(live)
    last_change = time.monotonic()
    start = last_change
    while time.monotonic() - last_change < quiet and time.monotonic() - start < limit:
        time.sleep(0.005)
        now = read_live(live)
        if total(now) != total(last):
            last, last_change = now, time.monotonic()
    return last, last_change


def ca_lids(env, cwd):
    r = subprocess.run(["ibnetdiscover", "-p"], env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    return sorted({int(line.split()[1]) for line in r.stdout.splitlines() if line.startswith("CA ")})


def start_probe(ibsm, sock, host, work, pairs, seconds, pace_ms):
    """An `ibsm sa flood` client at concurrency 1, paced: SA latency while
    the SM works. Returns the process; `probe_report` reads its JSON."""
    cwd = tempfile.mkdtemp(prefix="probe-", dir=work)
    cmd = [ibsm, "sa", "flood", "--kind", "path", "--concurrency", "1", "--pace-ms", str(pace_ms),
           "--duration", f"{seconds:.2f}", "--timeout-ms", "1000", "--pairs-file", pairs, "--json"]
    p = subprocess.Popen(cmd, env=sim_env(sock, host, {"LD_PRELOAD": UMAD2SIM}), cwd=cwd, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    common.PROCS.append(p)
    return p


def probe_report(p):
    out, err = p.communicate(timeout=300)
    try:
        r = json.loads(out)
    except ValueError:
        return {"failed": f"exit {p.returncode}: {err.strip()[:200]}"}
    return {"p50": r["latency_ms"]["p50"], "max": r["latency_ms"]["max"], "answered": r["answered"],
            "lost": r["lost"] + r["errors"]}


HEAVY_SWEEP = "<SIGHUP to the SM>"


def scenarios(net, sm_host, hub=None):
    """(name, console commands): a switch-to-switch cable of a switch the
    SM does not hang off (the sixth such switch), and the switch with the
    most switch-to-switch cables (a spine on a fat tree), or `hub` when
    named (on a torus every switch has as many)."""
    text = open(net).read()
    links = {}
    for block in text.split("\n\n"):
        m = re.search(r'^Switch\s+\d+\s+"([^"]+)"', block, re.M)
        if m:
            links[m.group(1)] = [(int(p), peer) for p, peer in re.findall(r'^\[(\d+)\]\s+"([^"]+)"', block, re.M)]
    switches = list(links)
    sm_switch = next(sw for sw, ports in links.items() if any(peer == sm_host for _, peer in ports))
    trunks = {sw: [(p, peer) for p, peer in ports if peer in links] for sw, ports in links.items()}
    others = [sw for sw in switches if sw != sm_switch and trunks[sw]]
    cable_sw = others[min(5, len(others) - 1)]
    port = trunks[cable_sw][0][0]
    if hub is None:
        hub = max((sw for sw in others if sw != cable_sw), key=lambda sw: len(trunks[sw]))
    elif hub not in trunks:
        raise SystemExit(f"--hub {hub}: no such switch in {net}")
    return [
        ("cable down", [f'Unlink "{cable_sw}"[{port}]']),
        ("cable up", [f'ReLink "{cable_sw}"[{port}]']),
        ("spine down", [f'Unlink "{hub}"']),
        ("spine up", [f'ReLink "{hub}"']),
        # Not the console: the SM itself is sent SIGHUP, on which both
        # OpenSM and ibsm sweep the whole fabric again (a heavy sweep) on a
        # fabric that did not change.
        ("heavy sweep (SIGHUP)", [HEAVY_SWEEP]),
    ]


def run_sm(kind, spec, ibsm, shim, quiet, work, pace_ms, hub=None):
    net, flags, hosts, _ = common.fabric_files(spec, ibsm, work)
    host = subprocess.run([ibsm, "topology", "sm-node", spec], capture_output=True, text=True,
                          check=True).stdout.strip()
    sock = f"ev{os.getpid()}{kind}"
    smdir = os.path.join(work, kind)
    os.makedirs(smdir, exist_ok=True)
    sim = subprocess.Popen(["ibsim", "-s"] + flags + [net], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=sim_env(sock, ""), cwd=smdir, text=True)
    results = []
    sm = None
    try:
        env = sim_env(sock, host, {"LD_PRELOAD": UMAD2SIM})
        deadline = time.time() + 300
        while subprocess.run(["smpquery", "-D", "nodeinfo", "0"], env=env, cwd=smdir,
                             capture_output=True).returncode != 0:
            if time.time() > deadline:
                raise SystemExit("ibsim did not become attachable")
            time.sleep(0.5)
        live = os.path.join(smdir, "live")
        log = os.path.join(smdir, "log")
        env = sim_env(sock, host, {"LD_PRELOAD": f"{shim} {UMAD2SIM}", "MADCOUNT_LIVE": live,
                                   "OSM_TMP_DIR": smdir, "OSM_CACHE_DIR": smdir})
        if kind == "opensm":
            cmd = ["opensm", "-s", "0", "-d2", "-f", log]
        else:
            cmd = [ibsm, "run", "--sweep-interval", "0", "--cache-dir", smdir, "--log-file", log]
        sm = subprocess.Popen(cmd, env=env, cwd=smdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not common.wait_log(log, "SUBNET UP"):
            raise SystemExit(f"{kind}: no SUBNET UP")
        wait_quiet(live, quiet)
        # The probe asks from a host the scenarios leave cabled.
        probe_host = hosts[-1] if hosts[-1] != host else hosts[0]
        pairs = os.path.join(smdir, "pairs")
        lids = ca_lids(sim_env(sock, probe_host, {"LD_PRELOAD": UMAD2SIM}), smdir)
        rng = random.Random(1)
        with open(pairs, "w") as f:
            for _ in range(4096):
                a, b = rng.sample(lids, 2)
                f.write(f"{a} {b}\n")
        for name, commands in scenarios(net, host, hub):
            # Long enough for the slowest reaction measured and the quiet
            # period after it; the probe's figures cover all of it.
            probe = start_probe(ibsm, sock, probe_host, smdir, pairs, quiet + 4.5, pace_ms)
            time.sleep(0.5)
            before = read_live(live)
            clear_first_repress(live)
            t0_ns = time.monotonic_ns()
            for c in commands:
                if c == HEAVY_SWEEP:
                    sm.send_signal(signal.SIGHUP)
                else:
                    sim.stdin.write(c + "\n")
            sim.stdin.flush()
            after, last = wait_quiet(live, quiet)
            last_ns, repress_ns = read_times(live)
            sa = probe_report(probe)
            d = diff(after, before)
            smps = total(d)
            results.append({
                "scenario": name,
                "smps": smps,
                # From the command to the last SMP, and from the SM's first
                # TrapRepress (the first trap taken in) to the last SMP: the
                # SM's own part, without ibsim's delay before the trap.
                "seconds": (last_ns - t0_ns) / 1e9 if smps and last_ns > t0_ns else 0.0,
                "sm_seconds": (last_ns - repress_ns) / 1e9 if smps and t0_ns < repress_ns <= last_ns else None,
                "lft": d.get((2, 25), 0),
                "portinfo_sets": d.get((2, 21), 0),
                "sa": sa,
                "by_attr": {f"{'Get' if m == 1 else 'Set' if m == 2 else m} {ATTR.get(a, a)}": n
                            for (m, a), n in sorted(d.items())},
            })
        # Restarts: the daemon stops, and `ibsm run --once` starts on the
        # fabric as it left it, on the same host (its cache directory) and
        # on another host (a fresh one); after OpenSM, ibsm on OpenSM's host.
        sm.terminate()
        sm.wait(30)
        sm = None
        other = hosts[len(hosts) // 2]
        starts = [("ibsm restart, same host", host, smdir), ("ibsm start, another host", other, None)]
        if kind == "opensm":
            starts = [("ibsm after OpenSM", host, None)]
        for name, at, cache in starts:
            cache = cache or tempfile.mkdtemp(prefix="cache-", dir=smdir)
            live = os.path.join(smdir, f"live-{at}")
            env = sim_env(sock, at, {"LD_PRELOAD": f"{shim} {UMAD2SIM}", "MADCOUNT_LIVE": live})
            t0 = time.monotonic()
            code = subprocess.run([ibsm, "run", "--once", "--cache-dir", cache, "--log-file",
                                   os.path.join(smdir, f"once-{at}.log")], env=env, cwd=smdir).returncode
            d = read_live(live)
            results.append({
                "scenario": name,
                "smps": total(d),
                "seconds": time.monotonic() - t0,
                "lft": d.get((2, 25), 0),
                "portinfo_sets": d.get((2, 21), 0),
                "by_attr": {f"{'Get' if m == 1 else 'Set' if m == 2 else m} {ATTR.get(a, a)}": n
                            for (m, a), n in sorted(d.items())},
                "code": code,
            })
    finally:
        if sm:
            sm.terminate()
            try:
                sm.wait(10)
            except subprocess.TimeoutExpired:
                sm.kill()
        sim.kill()
        sim.wait()
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", default="fattree2:radix=36,leaves=36,spines=18,hosts=18")
    ap.add_argument("--ibsm", default=os.path.join(ROOT, "target", "release", "ibsm"))
    ap.add_argument("--quiet", type=float, default=3.0, help="seconds without an SMP that end a reaction")
    ap.add_argument("--probe-pace", type=float, default=2.0,
                    help="ms the SA probe waits after each answer")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--hub", help="the switch the 'spine' scenarios unlink (default: the most switch cables)")
    args = ap.parse_args()
    common.kill_started_processes_on_exit()
    work = tempfile.mkdtemp(prefix="ibsm-events-")
    shim = build_shim(work)
    res = {kind: run_sm(kind, args.spec, args.ibsm, shim, args.quiet, work, args.probe_pace, args.hub) for kind in ("opensm", "ibsm")}
    print(f"## {args.spec}")
    print()
    print(f"'spine' is {args.hub or 'the switch with the most switch-to-switch cables (a spine on a fat tree)'}.")
    print()
    print("| scenario | OpenSM SMPs | ibsm SMPs | ratio | OpenSM s | ibsm s | ratio | LFT blocks (OpenSM / ibsm) "
          "| PortInfo Sets (OpenSM / ibsm) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for o, i in zip(res["opensm"], [r for r in res["ibsm"] if "code" not in r]):
        print(f"| {o['scenario']} | {o['smps']} | {i['smps']} | {common.ratio(i['smps'], o['smps'])} "
              f"| {o['seconds']:.3f} | {i['seconds']:.3f} | {common.ratio(i['seconds'], o['seconds'])} "
              f"| {o['lft']} / {i['lft']} | {o['portinfo_sets']} / {i['portinfo_sets']} |")
    print()
    print("The SM's own part: from its first TrapRepress (the first trap it took in) to its last SMP, seconds "
          "(none: no trap, as for SIGHUP):")
    print()
    print("| scenario | OpenSM | ibsm | ratio |")
    print("|---|---|---|---|")
    for o, i in zip(res["opensm"], [r for r in res["ibsm"] if "code" not in r]):
        fmt = lambda v: "none" if v is None else f"{v:.4f}"
        print(f"| {o['scenario']} | {fmt(o.get('sm_seconds'))} | {fmt(i.get('sm_seconds'))} "
              f"| {common.ratio(i.get('sm_seconds'), o.get('sm_seconds'))} |")
    print()
    print(f"SA PathRecord latency while reacting, ms (one probe query at a time, {args.probe_pace:g} ms apart):")
    print()
    print("| scenario | OpenSM p50 | ibsm p50 | OpenSM max | ibsm max | ratio of max | answered (OpenSM / ibsm) "
          "| lost (OpenSM / ibsm) |")
    print("|---|---|---|---|---|---|---|---|")
    for o, i in zip(res["opensm"], [r for r in res["ibsm"] if "code" not in r]):
        so, si = o["sa"], i["sa"]
        if "failed" in so or "failed" in si:
            print(f"| {o['scenario']} | probe failed: {so.get('failed', '')} {si.get('failed', '')} |")
            continue
        print(f"| {o['scenario']} | {so['p50']:.3f} | {si['p50']:.3f} | {so['max']:.3f} | {si['max']:.3f} "
              f"| {common.ratio(si['max'], so['max'])} | {so['answered']} / {si['answered']} "
              f"| {so['lost']} / {si['lost']} |")
    print()
    print("| start on the fabric as left | exit | SMPs | LFT Sets | PortInfo Sets | seconds |")
    print("|---|---|---|---|---|---|")
    for r in res["opensm"][-1:] + [r for r in res["ibsm"] if "code" in r]:
        print(f"| {r['scenario']} | {r['code']} | {r['smps']} | {r['lft']} | {r['portinfo_sets']} | {r['seconds']:.2f} |")
    print()
    for kind in ("opensm", "ibsm"):
        for r in res[kind]:
            print(f"- {kind}, {r['scenario']}: {r['by_attr']}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
