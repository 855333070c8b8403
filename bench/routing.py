#!/usr/bin/env python3
"""Routing comparison: OpenSM and ibsm, same fabrics, same engines, one run.

For each fabric the script writes an ibsim net file (`ibsm topology write`,
plus a copy with some switch-to-switch cables removed for the `-cut`
variants), starts ibsim, and for each engine:

- runs OpenSM on ibsim (`opensm -o -R <engine> -D 0x47`, -Q for the engines
  that use VLs) with its dump files on, reads its opensm-lfts.dump and its
  routing time from the log: from the first `building routing with` line
  (VERBOSE, 0x04) to `<engine> tables configured on all switches` (INFO),
  which brackets the min-hop matrices, the engine and the LFT computation;
  the log also says which engine OpenSM really used (it falls back to
  minhop silently). OpenSM's dfsssp and nue put paths on SLs but write them
  to no file: only the SA answers them, per source port and destination.
  For those two OpenSM keeps running until `ibsm sa path` has read the
  PathRecord of every end-port pair from its SA (many queries in flight),
  and the SLs go into the deadlock analysis of its tables (`ibsm analyze
  --path-sl`; ports of one switch with different SLs count as separate
  paths). OpenSM's dfsssp draws each answer's SL at random among the VLs
  its layer is spread over (any such draw keeps every VL a subset of one
  acyclic layer), so its column judges the one sample read. `? (SLs)`
  remains only where the query failed;
- runs `ibsm route` on the same net file, on the LIDs of OpenSM's dump
  (`--lids dump=...`), timed in process (wall and thread CPU);
- analyses both with the same code (`ibsm analyze` for OpenSM's tables;
  `ibsm route`'s own analysis, with its SLs, for ibsm's).

It prints one markdown table per fabric, OpenSM / ibsm side by side:
validity, all-to-all routes per switch-to-switch link (max = edge
forwarding index, mean), the shift pattern's worst and mean busiest link,
deadlock freedom (every VL's channel dependency graph acyclic, end-port
traffic), hop stretch against shortest paths (max, mean) and routing time.
Engines ibsm does not implement yet show `n/a`; `refused` means the engine
declined the fabric (OpenSM falls back to minhop instead, shown in "used").

usage: bench/routing.py [--ibsm target/release/ibsm] [--fabrics NAME,...]
                        [--engines E,...] [--large] [--keep] [--out FILE]
"""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

UMAD2SIM = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# name -> (spec, switch-to-switch cables to remove)
FABRICS = {
    "ft2-r8": ("fattree2:radix=8", 0),
    "ft2-r8-cut": ("fattree2:radix=8", 3),
    "ft2-r16": ("fattree2:radix=16", 0),
    "ft3-r8": ("fattree3:radix=8,pods=4", 0),
    "ft3-r8-cut": ("fattree3:radix=8,pods=4", 4),
    "torus3d-4": ("torus3d:4x4x4,hosts=2", 0),
    "mesh2d-6": ("mesh2d:6x6", 0),
    "dragonfly": ("dragonfly:routers=4,hosts=2", 0),
    "random-24": ("random:switches=24,hosts=48,seed=1", 0),
    "random-32": ("random:switches=32,degree=3,hosts=64,seed=7", 0),
}
LARGE = {"ft3-r36": ("fattree3:radix=36,pods=36", 0)}
ENGINES = ["minhop", "updn", "dnup", "ftree", "sssp", "dfsssp", "dor", "nue"]
# Engines OpenSM runs with QoS (-Q) because they place paths on VLs.
VL_ENGINES = {"dfsssp", "nue"}
MAX_VLS = 8


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def sim_env(sock, host, extra=None):
    env = dict(os.environ)
    env.update({"IBSIM_SOCKNAME": sock, "SIM_HOST": host})
    env.update(extra or {})
    return env


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def cut_links(net_text, count, seed):
    """Removes `count` switch-to-switch cables from a net file written by
    `ibsm topology write`, keeping the switches connected."""
    lines = net_text.split("\n")
    node_re = re.compile(r'^(Switch|Ca|Hca|Rt)\s+\d+\s+"([^"]+)"')
    link_re = re.compile(r'^\[(\d+)\]\s+"([^"]+)"\[(\d+)\]')
    kind, owner, where = {}, None, []
    for i, l in enumerate(lines):
        m = node_re.match(l)
        if m:
            owner = m.group(2)
            kind[owner] = m.group(1)
            continue
        m = link_re.match(l)
        if m and owner:
            where.append((owner, int(m.group(1)), m.group(2), int(m.group(3)), i))
    switch_links = sorted({tuple(sorted([(a, p), (b, q)])) for a, p, b, q, _ in where
                           if kind.get(a) == "Switch" and kind.get(b) == "Switch"})
    rng = random.Random(seed)
    for _ in range(100):
        drop = set(rng.sample(switch_links, count))
        adj = {}
        for x, y in switch_links:
            if (x, y) in drop:
                continue
            adj.setdefault(x[0], set()).add(y[0])
            adj.setdefault(y[0], set()).add(x[0])
        switches = [n for n, k in kind.items() if k == "Switch"]
        seen, todo = {switches[0]}, [switches[0]]
        while todo:
            for n in adj.get(todo.pop(), ()):
                if n not in seen:
                    seen.add(n)
                    todo.append(n)
        if len(seen) == len(switches):
            break
    else:
        raise SystemExit("could not cut cables and stay connected")
    gone = set()
    for a, p, b, q, i in where:
        if tuple(sorted([(a, p), (b, q)])) in drop:
            gone.add(i)
    header = "# %d switch-to-switch cables removed: %s" % (
        count, ", ".join("%s[%d]-%s[%d]" % (x[0], x[1], y[0], y[1]) for x, y in sorted(drop)))
    return header + "\n" + "\n".join(l for i, l in enumerate(lines) if i not in gone)


def log_time(line):
    """Seconds of the day from an OpenSM log line (`Nov 30 10:14:40 085441 [...]`)."""
    m = re.match(r"\w+ +\d+ (\d+):(\d+):(\d+) (\d+) ", line)
    if not m:
        return None
    h, mi, s, us = (int(x) for x in m.groups())
    return h * 3600 + mi * 60 + s + us / 1e6


def parse_osm_log(path):
    start = end = None
    used = None
    for line in open(path, errors="replace"):
        if "building routing with" in line and start is None:
            start = log_time(line)
        m = re.search(r"-> osm_ucast_mgr_process: (\S+) tables configured on all switches", line)
        if m:
            used = m.group(1)
            end = log_time(line)
    ms = (end - start) * 1e3 if start is not None and end is not None else None
    return used, ms


def wait_for(path, needle, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.exists(path) and needle in open(path, errors="replace").read():
            return True
        time.sleep(0.2)
    return False


def ca_lids(subnet_lst):
    """End-port LIDs from OpenSM's opensm-subnet.lst (one link per line)."""
    lids = set()
    for m in re.finditer(r"\{ CA\S* [^{}]*\{[^}]*\} LID:([0-9A-Fa-f]+) ", open(subnet_lst).read()):
        lids.add(int(m.group(1), 16))
    return sorted(lids)


def query_path_sls(ctx, outdir):
    """Asks the running OpenSM's SA for the PathRecord of every end-port
    pair (`ibsm sa path`, many queries in flight); returns the path-SL
    file for `ibsm analyze --path-sl`, or an error string."""
    lids = ca_lids(os.path.join(outdir, "opensm-subnet.lst"))
    pairs = os.path.join(outdir, "pairs.txt")
    with open(pairs, "w") as f:
        for a in lids:
            for b in lids:
                if a != b:
                    f.write("%d %d\n" % (a, b))
    out = os.path.join(outdir, "opensm-path-sl.txt")
    env = sim_env(ctx["sock"], ctx["host"], {"LD_PRELOAD": UMAD2SIM})
    q = os.path.join(outdir, "sa-query")
    os.makedirs(q, exist_ok=True)
    r = subprocess.run([ctx["ibsm"], "sa", "path", "--pairs-file", pairs, "--path-sl-out", out, "--window", "16"],
                       env=env, cwd=q, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       timeout=ctx["timeout"])
    if r.returncode != 0:
        return None, "sa path: " + (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1][:80]
    return out, None


def run_opensm(ctx, engine, outdir):
    """One OpenSM routing run; returns a dict (dump path, engine used,
    routing ms, error, and for the VL engines the path-SL file read from
    its SA). Engines without VLs run with `-o` (sweep once, exit); the VL
    engines keep running until their SA has answered every end-port pair."""
    os.makedirs(outdir, exist_ok=True)
    logf = os.path.join(outdir, "opensm.log")
    conf = os.path.join(outdir, "opensm.conf")
    with open(conf, "w") as f:
        # As many VLs as ibsm's engines are given, for Nue and on every port.
        f.write("nue_max_num_vls %d\nmax_op_vls %d\n" % (MAX_VLS, MAX_VLS))
    env = sim_env(ctx["sock"], ctx["host"], {"LD_PRELOAD": UMAD2SIM, "OSM_TMP_DIR": outdir, "OSM_CACHE_DIR": outdir})
    cmd = ["opensm", "-F", conf, "-R", engine, "-D", "0x47", "-f", logf, "--dump_files_dir", outdir]
    res = {"dump": os.path.join(outdir, "opensm-lfts.dump"), "error": None, "sls": None}
    if engine in VL_ENGINES:
        # -d2 flushes the log at once, so SUBNET UP is seen when it happens.
        osm = subprocess.Popen(cmd + ["-Q", "-d2"], env=env, cwd=outdir, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        try:
            if wait_for(logf, "SUBNET UP", ctx["timeout"]):
                res["sls"], res["sl_error"] = query_path_sls(ctx, outdir)
            else:
                res["error"] = "no SUBNET UP" if osm.poll() is None else "exit %d" % osm.returncode
        finally:
            osm.terminate()
            try:
                osm.wait(timeout=30)
            except subprocess.TimeoutExpired:
                osm.kill()
                osm.wait()
    else:
        try:
            r = subprocess.run(cmd + ["-o"], env=env, cwd=outdir, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=ctx["timeout"])
            if r.returncode != 0:
                res["error"] = "exit %d" % r.returncode
        except subprocess.TimeoutExpired:
            res["error"] = "timeout"
    res["used"], res["ms"] = parse_osm_log(logf) if os.path.exists(logf) else (None, None)
    if not os.path.exists(res["dump"]):
        res["error"] = res["error"] or "no opensm-lfts.dump"
    return res


def summary_of(analysis):
    s = analysis["summary"]
    s = dict(s)
    s["vl_list"] = [v["vl"] for v in analysis["deadlock"]["vls"]]
    return s


def bench_fabric(name, spec, cut, args, work):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    net = os.path.join(d, "fabric.net")
    subprocess.run([args.ibsm, "topology", "write", spec, "--out", net], check=True)
    if cut:
        text = cut_links(open(net).read(), cut, seed=len(name))
        with open(net, "w") as f:
            f.write(text)
    flags = run([args.ibsm, "topology", "ibsim-args", net], check=True).stdout.split()
    host = run([args.ibsm, "topology", "sm-node", net], check=True).stdout.strip()
    shape = run([args.ibsm, "topology", "show", net], check=True).stdout.strip()
    sock = "ibsm-rbench-%d-%s" % (os.getpid(), name)
    simlog = open(os.path.join(d, "ibsim.log"), "w")
    sim = subprocess.Popen(["ibsim", "-s", "-n"] + flags + [net], stdin=subprocess.DEVNULL, stdout=simlog,
                           stderr=simlog, env=sim_env(sock, ""), cwd=d)
    rows = []
    try:
        if not wait_for(os.path.join(d, "ibsim.log"), "simulator ready", 600):
            raise SystemExit("%s: ibsim did not start" % name)
        ctx = {"sock": sock, "host": host, "timeout": args.timeout, "ibsm": os.path.abspath(args.ibsm)}
        for engine in args.engines:
            log("%s: %s" % (name, engine))
            osm = run_opensm(ctx, engine, os.path.join(d, "opensm-" + engine))
            row = {"engine": engine, "osm": osm, "osm_an": None, "ibsm": None, "ibsm_err": None}
            if not osm["error"]:
                sls = ["--path-sl", osm["sls"]] if osm.get("sls") else []
                r = run([args.ibsm, "analyze", "-t", net, "--lfts", osm["dump"], "--json"] + sls + args.analysis_flags)
                if r.returncode == 0:
                    row["osm_an"] = summary_of(json.loads(r.stdout)["analysis"])
                else:
                    osm["error"] = "analyze: " + r.stderr.strip().splitlines()[-1][:80]
            lids = ["--lids", "dump=" + osm["dump"]] if not osm["error"] else []
            r = run([args.ibsm, "route", "-t", net, "-e", engine, "--max-vls", str(MAX_VLS), "--json"] + lids +
                    args.analysis_flags)
            if r.returncode == 0:
                out = json.loads(r.stdout)
                row["ibsm"] = summary_of(out["analysis"])
                row["ibsm"]["ms"] = out["compute_ms"]
                row["ibsm"]["cpu_ms"] = out["compute_cpu_ms"]
                row["ibsm"]["warning"] = out["warning"]
            else:
                msg = r.stderr.strip()
                row["ibsm_err"] = "n/a" if "not implemented yet" in msg else "refused"
                row["ibsm_why"] = msg
            rows.append(row)
    finally:
        sim.kill()
        sim.wait()
    return shape, rows


def validity(a):
    if a["valid"]:
        return "yes"
    # Every end port reaches every end port; some switch LIDs are not routed.
    return "hosts only" if a["end_ports_valid"] else "**NO**"


def cell(o, i):
    return "%s / %s" % (o, i)


def fmt_side(row, side):
    """Per-column strings for one side ('osm' or 'ibsm')."""
    if side == "osm":
        a = row["osm_an"]
        if a is None:
            return None
        # OpenSM's VL engines keep their path SLs for the SA: the dump has
        # none. They are read back from the SA, one PathRecord per end-port
        # pair; without them the analysis over one VL would not be telling.
        sl_known = row["osm"]["used"] not in VL_ENGINES or bool(row["osm"].get("sls"))
        ms = row["osm"]["ms"]
    else:
        a = row["ibsm"]
        if a is None:
            return None
        sl_known = True
        ms = a["ms"]
    dl = ("yes (%d VL)" % a["vls"] if a["vls"] > 1 else "yes") if a["deadlock_free"] else "**NO**"
    if not sl_known:
        dl = "? (SLs)"
    return {
        "valid": validity(a),
        "a2a_max": str(a["all_to_all_max"]),
        "a2a_mean": "%.1f" % a["all_to_all_mean"],
        "shift": "%d" % a["shift_worst_max"],
        "shift_mean": "%.2f" % a["shift_mean_max"],
        "deadlock": dl,
        "stretch": "%d, %.3f" % (a["max_stretch"], a["mean_stretch"]),
        "ms": ("%.2f" % ms if ms < 10 else "%.0f" % ms) if ms is not None else "?",
    }


COLUMNS = [("valid", "valid"), ("a2a_max", "all-to-all max"), ("a2a_mean", "all-to-all mean"),
           ("shift", "shift worst"), ("shift_mean", "shift mean"), ("deadlock", "deadlock free"),
           ("stretch", "stretch max, mean"), ("ms", "routing ms")]


def report(name, spec, cut, shape, rows, out):
    title = "### %s: `%s`%s (%s)" % (name, spec, ", %d cables cut" % cut if cut else "", shape)
    lines = [title, "",
             "| engine | OpenSM used | " + " | ".join(h + " (OpenSM / ibsm)" for _, h in COLUMNS) + " |",
             "|---|---|" + "---|" * len(COLUMNS)]
    for row in rows:
        o = fmt_side(row, "osm")
        i = fmt_side(row, "ibsm")
        used = row["osm"]["used"] or "-"
        if row["osm"]["error"]:
            used += " (%s)" % row["osm"]["error"]
        cells = []
        for key, _ in COLUMNS:
            ov = o[key] if o else "-"
            iv = i[key] if i else row["ibsm_err"]
            cells.append(cell(ov, iv))
        lines.append("| %s | %s | %s |" % (row["engine"], used, " | ".join(cells)))
    lines.append("")
    text = "\n".join(lines)
    print(text, flush=True)
    if out:
        out.write(text + "\n")
        out.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ibsm", default=os.path.join(ROOT, "target", "release", "ibsm"))
    ap.add_argument("--fabrics", default=",".join(FABRICS), help="comma list of: %s" % ", ".join(
        list(FABRICS) + list(LARGE)))
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--large", action="store_true", help="add the 11,664-host 3-level fat tree")
    ap.add_argument("--shifts", type=int, default=None,
                    help="evaluate at most N shifts per fabric (default: all; 512 on --large fabrics)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per OpenSM run")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--out", help="also append the tables to this file")
    args = ap.parse_args()
    if not os.access(args.ibsm, os.X_OK):
        raise SystemExit("%s not found; build it with cargo build --release" % args.ibsm)
    for tool in ("ibsim", "opensm"):
        if not shutil.which(tool):
            raise SystemExit("%s is not installed" % tool)
    names = [n for n in args.fabrics.split(",") if n]
    if args.large:
        names += [n for n in LARGE if n not in names]
    args.engines = [e for e in args.engines.split(",") if e]
    work = tempfile.mkdtemp(prefix="ibsm-routing-bench-")
    out = open(args.out, "a") if args.out else None
    ver = re.search(r"OpenSM \S+", run(["opensm", "--version"]).stdout + run(["opensm", "--version"]).stderr)
    head = "## Routing: %s vs ibsm (%s), max VLs %d\n" % (
        ver.group(0) if ver else "OpenSM", time.strftime("%Y-%m-%d"), MAX_VLS)
    print(head, flush=True)
    if out:
        out.write(head + "\n")
    try:
        for name in names:
            spec, cut = FABRICS.get(name) or LARGE.get(name) or (None, None)
            if spec is None:
                raise SystemExit("unknown fabric %s" % name)
            shifts = args.shifts if args.shifts is not None else (512 if name in LARGE else None)
            args.analysis_flags = ["--shifts", str(shifts)] if shifts else []
            shape, rows = bench_fabric(name, spec, cut, args, work)
            report(name, spec, cut, shape, rows, out)
    finally:
        if args.keep:
            log("work directory: %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
