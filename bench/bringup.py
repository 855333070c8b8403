#!/usr/bin/env python3
"""Cold bring-up benchmark: OpenSM (`opensm -o`) and ibsm (`ibsm run --once`)
on the same ibsim fabric, in one run.

For each fabric it reports wall time to SUBNET UP (process start to exit in
once mode), SMPs sent by attribute and method (counted by the madcount shim,
the same way for both SMs), peak RSS (wait4), the minimum SMP count a cold
bring-up needs, and the ratios.

usage: bench/bringup.py [--sizes small,650,3900,11700] [--ibsm target/release/ibsm]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

UMAD2SIM = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

SIZES = {
    "small": "fattree2:radix=8,leaves=4,spines=2,hosts=4",
    "650": "fattree2:radix=36,leaves=36,spines=18,hosts=18",
    "3900": "fattree3:radix=36,pods=12",
    "11700": "fattree3:radix=36,pods=36",
}

ATTR_NAMES = {16: "NodeDescription", 17: "NodeInfo", 18: "SwitchInfo", 20: "GUIDInfo", 21: "PortInfo",
              22: "P_KeyTable", 23: "SLtoVLMapping", 24: "VLArbitration", 25: "LFT", 27: "MFT", 32: "SMInfo"}
METHOD_NAMES = {1: "Get", 2: "Set", 0x81: "GetResp", 5: "Trap", 7: "TrapRepress"}


def build_shim(workdir):
    so = os.path.join(workdir, "madcount.so")
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", so, os.path.join(HERE, "madcount.c"), "-ldl", "-lpthread"],
                   check=True)
    return so


def sim_env(sock, host, extra=None):
    env = dict(os.environ)
    env.update({"IBSIM_SOCKNAME": sock, "SIM_HOST": host})
    env.update(extra or {})
    return env


def start_ibsim(net, sock, args, workdir):
    log = open(os.path.join(workdir, "ibsim.log"), "w")
    p = subprocess.Popen(["ibsim", "-s"] + args + [net], stdin=subprocess.PIPE, stdout=log, stderr=log,
                         env=sim_env(sock, ""), cwd=workdir)
    return p


def wait_attachable(sock, host, workdir, timeout=300):
    deadline = time.time() + timeout
    env = sim_env(sock, host, {"LD_PRELOAD": UMAD2SIM})
    while time.time() < deadline:
        r = subprocess.run(["smpquery", "-D", "nodeinfo", "0"], env=env, cwd=workdir, capture_output=True)
        if r.returncode == 0:
            return
        time.sleep(0.5)
    raise SystemExit(f"ibsim on {sock} did not become attachable")


def run_measured(cmd, env, cwd):
    """Runs cmd to completion; returns (exit code, wall seconds, peak RSS MiB).

    Peak RSS comes from GNU time: a child forked from this Python process
    would report Python's own resident pages as its maximum (about 14 MB)."""
    rss_file = os.path.join(cwd, "maxrss")
    env = dict(env)
    # The preload goes to the SM alone, not to GNU time.
    preload = ["env", "LD_PRELOAD=" + env.pop("LD_PRELOAD")] if "LD_PRELOAD" in env else []
    t0 = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss_file] + preload + cmd, env=env, cwd=cwd,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    rss_kb = int(open(rss_file).read().split()[-1])
    return p.returncode, wall, rss_kb / 1024.0


def read_counts(path):
    counts = {}
    if not os.path.exists(path):
        return counts
    for line in open(path):
        c, m, a, n = (int(x) for x in line.split())
        if c in (0x01, 0x81):
            key = (METHOD_NAMES.get(m, hex(m)), ATTR_NAMES.get(a, str(a)))
            counts[key] = counts.get(key, 0) + n
    return counts


def minimum_smps(ibsm, spec):
    r = subprocess.run([ibsm, "topology", "minimum-smps", spec], capture_output=True, text=True, check=True)
    return int(r.stdout.split()[0])


def bench_one(name, spec, ibsm, shim, keep):
    work = tempfile.mkdtemp(prefix=f"ibsm-bench-{name}-")
    net = os.path.join(work, "fabric.net")
    subprocess.run([ibsm, "topology", "write", spec, "--out", net], check=True)
    flags = subprocess.run([ibsm, "topology", "ibsim-args", spec], capture_output=True, text=True, check=True).stdout.split()
    host = subprocess.run([ibsm, "topology", "sm-node", spec], capture_output=True, text=True, check=True).stdout.strip()
    results = {}
    for sm in ("opensm", "ibsm"):
        sock = f"bench{os.getpid()}{name}{sm}"
        sim = start_ibsim(net, sock, flags, work)
        try:
            wait_attachable(sock, host, work)
            out = os.path.join(work, f"{sm}.counts")
            smdir = os.path.join(work, sm)
            os.makedirs(smdir, exist_ok=True)
            env = sim_env(sock, host, {"LD_PRELOAD": f"{shim} {UMAD2SIM}", "MADCOUNT_OUT": out,
                                       "OSM_TMP_DIR": smdir, "OSM_CACHE_DIR": smdir})
            if sm == "opensm":
                cmd = ["opensm", "-o", "-f", os.path.join(smdir, "log")]
            else:
                cmd = [ibsm, "run", "--once", "--cache-dir", smdir, "--log-file", os.path.join(smdir, "log")]
            code, wall, rss = run_measured(cmd, env, smdir)
            results[sm] = {"code": code, "wall": wall, "rss": rss, "counts": read_counts(out)}
        finally:
            sim.kill()
            sim.wait()
    results["minimum"] = minimum_smps(ibsm, spec)
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    return results


def report(name, spec, r):
    o, i = r["opensm"], r["ibsm"]
    on, inn = sum(o["counts"].values()), sum(i["counts"].values())
    print(f"## {name}: {spec}")
    print(f"| | OpenSM | ibsm | ibsm/OpenSM |")
    print(f"|---|---|---|---|")
    print(f"| exit code | {o['code']} | {i['code']} | |")
    print(f"| wall time to SUBNET UP (s) | {o['wall']:.2f} | {i['wall']:.2f} | {i['wall'] / max(o['wall'], 1e-9):.2f} |")
    print(f"| SMPs sent | {on} | {inn} | {inn / max(on, 1):.2f} |")
    print(f"| peak RSS (MiB) | {o['rss']:.1f} | {i['rss']:.1f} | {i['rss'] / max(o['rss'], 1e-9):.2f} |")
    print(f"| SMPs / minimum ({r['minimum']}) | {on / r['minimum']:.2f} | {inn / r['minimum']:.2f} | |")
    print()
    keys = sorted(set(o["counts"]) | set(i["counts"]))
    print("| SMPs by method, attribute | OpenSM | ibsm |")
    print("|---|---|---|")
    for k in keys:
        print(f"| {k[0]} {k[1]} | {o['counts'].get(k, 0)} | {i['counts'].get(k, 0)} |")
    print()
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="small,650,3900,11700")
    ap.add_argument("--ibsm", default=os.path.join(ROOT, "target", "release", "ibsm"))
    ap.add_argument("--keep", action="store_true", help="keep the work directories")
    args = ap.parse_args()
    if not os.path.exists("/usr/bin/time"):
        raise SystemExit("bench needs GNU time: apt-get install time")
    work = tempfile.mkdtemp(prefix="ibsm-bench-")
    shim = build_shim(work)
    for name in args.sizes.split(","):
        spec = SIZES.get(name, name)
        report(name, spec, bench_one(name, spec, args.ibsm, shim, args.keep))


if __name__ == "__main__":
    main()
