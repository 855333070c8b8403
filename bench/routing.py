#!/usr/bin/env python3
"""Routing comparison: OpenSM and ibsm, same fabrics, same engines, one run.

For each fabric the script writes an ibsim net file (`ibsm topology write`;
the degraded trees come from the generator's `cut=<percent>,cutseed=<n>`
keys, the two older `-cut` fabrics from this script's own cable cutter,
kept so their rows stay comparable with bench/routing-results.md), starts
ibsim, and for each engine:

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
The engine `auto` is ibsm's default (`ibsm route -e auto`: it picks by
topology and checks for credit loops); OpenSM has no such engine, so its
column is OpenSM's own default, OpenSM run without -R (minhop), and the
engine cell names what auto picked, with auto's reason under the table.
At the end a summary table gives, per fabric, every engine's busiest link
(all-to-all max, OpenSM / ibsm) and the ratio of ibsm's best deadlock-free
single-VL result to OpenSM's dfsssp.

VL budget. `--max-vls N` (default 8) goes to `ibsm route --max-vls` and to
OpenSM, whose engines take it from the fabric rather than from a flag: nue
reads `nue_max_num_vls`, dfsssp the OperationalVLs the switch ports hold
when it routes. OpenSM sets OperationalVLs (PortInfo, IBA 14.2.5.6: 1 = VL0,
2 = VL0-1, 3 = VL0-3, 4 = VL0-7, 5 = VL0-14) to min(VLCap, `max_op_vls`),
but only after routing, and ibsim's ports start at VL0-7 with VLCap VL0-7.
So OpenSM runs with the largest of 1, 2, 4, 8 data VLs not above N, and
when that is not 8 one OpenSM minhop run first sets every port's
OperationalVLs so that dfsssp sees the budget from its first sweep. The VL
count each OpenSM run saw is read from its log; a run that saw another
count says so in the "used" column. `--single-vl` runs ibsm's engines with
`--max-vls 1` and OpenSM's as usual (dfsssp and nue with -Q and N VLs),
for comparing ibsm's single-VL routing with OpenSM's multi-VL dfsssp
(issue 12, item 3); the header says so.

Fabric sets: the default set below; `--large` adds the 11,664-host 3-level
tree; `--degraded` the degraded fat trees (2-level radix 16 and 3-level
radix 8 with 8 pods, 128 hosts each, at 5, 15 and 30% of switch-to-switch
cables cut, cutseed 1 and 2, and the 648-host radix-36 tree with 15% cut);
`--irregular` the irregular fabrics for single-VL routing (two random
fabrics of 40 switches, two dragonflies); `--issue12` is the default set
with both. The figures for issue 12 come from:

    cargo build --release
    python3 bench/routing.py --issue12 --out bench/routing-results.md
    python3 bench/routing.py --issue12 --single-vl --out bench/routing-results-1vl.md

usage: bench/routing.py [--ibsm target/release/ibsm] [--fabrics NAME,...]
                        [--engines E,...] [--large] [--degraded] [--irregular]
                        [--issue12] [--max-vls N] [--single-vl] [--keep]
                        [--out FILE]
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

UMAD2SIM = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# name -> (spec, switch-to-switch cables this script removes). The `-cut`
# fabrics use cut_links, whose draw is not the generator's: converting them
# to `cut=` specs would change which cables go, so they stay as they were.
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


def degraded_trees():
    """Issue 12's degraded fat trees: the generator's cut keys, so each is
    one spec string anyone can rebuild with `ibsm topology write`."""
    trees = {}
    for tag, base in (("ft2-r16", "fattree2:radix=16"), ("ft3-r8p8", "fattree3:radix=8,pods=8")):
        for cut in (5, 15, 30):
            for seed in (1, 2):
                trees["%s-c%d-s%d" % (tag, cut, seed)] = ("%s,cut=%d,cutseed=%d" % (base, cut, seed), 0)
    trees["ft2-r36-c15-s1"] = ("fattree2:radix=36,cut=15,cutseed=1", 0)
    return trees


DEGRADED = degraded_trees()
# Fabrics on which single-VL routing is hard (no up*/down* order that is
# also short): issue 12, item 3.
IRREGULAR = {
    "random-40-s1": ("random:switches=40,degree=3,hosts=160,seed=1", 0),
    "random-40-s2": ("random:switches=40,degree=3,hosts=160,seed=2", 0),
    "dragonfly": FABRICS["dragonfly"],
    "dragonfly-r6": ("dragonfly:routers=6,hosts=2", 0),
}
ALL_FABRICS = {**FABRICS, **LARGE, **DEGRADED, **IRREGULAR}
ENGINES = ["minhop", "updn", "dnup", "ftree", "sssp", "dfsssp", "dor", "nue", "auto"]
# Engines OpenSM runs with QoS (-Q) because they place paths on VLs.
VL_ENGINES = {"dfsssp", "nue"}
# ibsm-only engines; OpenSM runs its default (no -R) next to them.
IBSM_ONLY = {"auto"}
DEFAULT_MAX_VLS = 8
# ibsim's ports come up with OperationalVLs = VL0-7 and VLCap = VL0-7, so
# OpenSM can use 8 data VLs on ibsim and no more.
IBSIM_VLS = 8
# OperationalVLs code (IBA 14.2.5.6, PortInfo) per data-VL count.
OP_VLS_CODE = {1: 1, 2: 2, 4: 3, 8: 4, 15: 5}
# ibsim reads net files in 255-byte lines (it splits longer ones), so ibsm
# refuses longer lines, comments included.
MAX_LINE = 255


def osm_vls(n):
    """The data VLs OpenSM can run with on ibsim for a budget of n: the
    largest OperationalVLs step not above n, capped by ibsim's VLCap."""
    return max(v for v in OP_VLS_CODE if v <= min(n, IBSIM_VLS))


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
    header = ["# %d switch-to-switch cables removed:" % count]
    for x, y in sorted(drop):
        cable = "%s[%d]-%s[%d]" % (x[0], x[1], y[0], y[1])
        # Net file lines are at most MAX_LINE bytes, comments too: wrap.
        if len((header[-1] + " " + cable).encode()) > MAX_LINE or len(header) == 1:
            header.append("#")
        header[-1] += " " + cable
    return "\n".join(header) + "\n" + "\n".join(l for i, l in enumerate(lines) if i not in gone)


def log_time(line):
    """Seconds of the day from an OpenSM log line (`Nov 30 10:14:40 085441 [...]`)."""
    m = re.match(r"\w+ +\d+ (\d+):(\d+):(\d+) (\d+) ", line)
    if not m:
        return None
    h, mi, s, us = (int(x) for x in m.groups())
    return h * 3600 + mi * 60 + s + us / 1e6


def parse_osm_log(path):
    """(engine used, routing ms, data VLs the engine saw) from an OpenSM log.
    The VLs: dfsssp logs those it found on the switch ports; otherwise the
    switch ports' minimal data VLs, which nue takes as its ceiling."""
    start = end = None
    used = None
    dfsssp_vls = min_vls = None
    for line in open(path, errors="replace"):
        if "building routing with" in line and start is None:
            start = log_time(line)
        m = re.search(r"-> osm_ucast_mgr_process: (\S+) tables configured on all switches", line)
        if m:
            used = m.group(1)
            end = log_time(line)
        m = re.search(r"Virtual Lanes available: (\d+)", line)
        if m:
            dfsssp_vls = int(m.group(1))
        m = re.search(r"Setting switch port minimal data VLs to:(\d+)", line)
        if m:
            min_vls = int(m.group(1))
    ms = (end - start) * 1e3 if start is not None and end is not None else None
    return used, ms, dfsssp_vls if dfsssp_vls is not None else min_vls


def wait_for(path, needle, timeout):
    return common.wait_log(path, needle, timeout)


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
    routing ms, data VLs seen, error, and for the VL engines the path-SL
    file read from its SA). Engines without VLs run with `-o` (sweep once,
    exit); the VL engines keep running until their SA has answered every
    end-port pair. An ibsm-only engine (auto) runs OpenSM's default engine
    (no -R)."""
    os.makedirs(outdir, exist_ok=True)
    logf = os.path.join(outdir, "opensm.log")
    conf = os.path.join(outdir, "opensm.conf")
    vls = ctx["osm_vls"]
    with open(conf, "w") as f:
        # Nue's ceiling, and the OperationalVLs every port is set to (as
        # its code: 4 = VL0-7), which dfsssp reads in the next OpenSM run.
        f.write("nue_max_num_vls %d\nmax_op_vls %d\n" % (vls, OP_VLS_CODE[vls]))
    env = sim_env(ctx["sock"], ctx["host"], {"LD_PRELOAD": UMAD2SIM, "OSM_TMP_DIR": outdir, "OSM_CACHE_DIR": outdir})
    cmd = ["opensm", "-F", conf, "-D", "0x47", "-f", logf, "--dump_files_dir", outdir]
    if engine not in IBSM_ONLY:
        cmd += ["-R", engine]
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
    res["used"], res["ms"], res["vls_seen"] = parse_osm_log(logf) if os.path.exists(logf) else (None, None, None)
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
        ctx = {"sock": sock, "host": host, "timeout": args.timeout, "ibsm": os.path.abspath(args.ibsm),
               "osm_vls": args.osm_vls}
        if args.osm_vls != IBSIM_VLS:
            # dfsssp reads the OperationalVLs the ports already hold, and
            # OpenSM only sets them after routing: one run sets them first.
            log("%s: OpenSM run setting OperationalVLs to %d VLs" % (name, args.osm_vls))
            prime = run_opensm(ctx, "minhop", os.path.join(d, "opensm-set-vls"))
            if prime["error"]:
                raise SystemExit("%s: OpenSM run setting the VLs failed: %s" % (name, prime["error"]))
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
            r = run([args.ibsm, "route", "-t", net, "-e", engine, "--max-vls", str(args.ibsm_vls), "--json"] + lids +
                    args.analysis_flags)
            if r.returncode == 0:
                out = json.loads(r.stdout)
                row["ibsm"] = summary_of(out["analysis"])
                row["ibsm"]["ms"] = out["compute_ms"]
                row["ibsm"]["cpu_ms"] = out["compute_cpu_ms"]
                row["ibsm"]["warning"] = out["warning"]
                # The engine that made the tables (auto names its pick) and
                # auto's reason and the candidates it passed over.
                row["ibsm"]["engine"] = out.get("engine")
                row["ibsm"]["reason"] = out.get("reason")
                row["ibsm"]["skipped"] = out.get("skipped") or []
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


def emit(text, out):
    print(text, flush=True)
    if out:
        out.write(text + "\n")
        out.flush()


def engine_cell(row):
    """The row's engine; for auto, also the engine it picked."""
    picked = (row["ibsm"] or {}).get("engine")
    if row["engine"] == "auto" and picked:
        return "auto (%s)" % picked
    return row["engine"]


def used_cell(row, want_vls):
    osm = row["osm"]
    used = osm["used"] or "-"
    if row["engine"] in IBSM_ONLY:
        used += ", OpenSM's default"
    # Only VL engines depend on the count; flag a run that saw another one.
    if osm["used"] in VL_ENGINES and osm.get("vls_seen") not in (None, want_vls):
        used += " (saw %d VLs)" % osm["vls_seen"]
    if osm["error"]:
        used += " (%s)" % osm["error"]
    return used


def report(name, spec, cut, shape, rows, args, out):
    title = "### %s: `%s`%s (%s)" % (name, spec, ", %d cables cut" % cut if cut else "", shape)
    lines = [title, "",
             "| engine | OpenSM used | " + " | ".join(h + " (OpenSM / ibsm)" for _, h in COLUMNS) + " |",
             "|---|---|" + "---|" * len(COLUMNS)]
    notes = []
    for row in rows:
        o = fmt_side(row, "osm")
        i = fmt_side(row, "ibsm")
        cells = []
        for key, _ in COLUMNS:
            ov = o[key] if o else "-"
            iv = i[key] if i else row["ibsm_err"]
            cells.append(cell(ov, iv))
        lines.append("| %s | %s | %s |" % (engine_cell(row), used_cell(row, args.osm_vls), " | ".join(cells)))
        if row["engine"] == "auto" and row["ibsm"]:
            why = row["ibsm"].get("reason") or "no reason given"
            for k in row["ibsm"]["skipped"]:
                why += "; %s skipped: %s" % (k.get("engine"), k.get("reason"))
            notes.append("auto chose %s: %s" % (row["ibsm"].get("engine"), why))
    lines.append("")
    lines += [n + "\n" for n in notes]
    emit("\n".join(lines), out)


def busiest(a):
    """All-to-all max with marks: `*` credit loops, `!` some end-port pair
    not delivered, `?` OpenSM's SLs unknown."""
    if a is None:
        return None
    mark = "" if a["end_ports_valid"] else "!"
    if a.get("sl_unknown"):
        mark += "?"
    elif not a["deadlock_free"]:
        mark += "*"
    return "%d%s" % (a["all_to_all_max"], mark)


def single_vl_ok(a):
    """A result that counts for "best single-VL": every end-port pair
    delivered, deadlock-free, on one VL."""
    return a is not None and a["end_ports_valid"] and a["deadlock_free"] and a["vls"] == 1


def summary_row(name, rows):
    """One summary line: per engine OpenSM / ibsm busiest link, then ibsm's
    best deadlock-free single-VL result against OpenSM's dfsssp."""
    cells = []
    best = None
    osm_dfsssp = None
    for row in rows:
        o = row["osm_an"]
        if o is not None:
            o = dict(o, sl_unknown=row["osm"]["used"] in VL_ENGINES and not row["osm"].get("sls"))
        ov = busiest(o) or "-"
        if o is not None and row["osm"]["used"] != row["engine"] and row["engine"] not in IBSM_ONLY:
            ov += " (%s)" % row["osm"]["used"]
        iv = busiest(row["ibsm"]) or row["ibsm_err"]
        if row["engine"] == "auto" and row["ibsm"]:
            iv += " (%s)" % row["ibsm"].get("engine")
        cells.append(cell(ov, iv))
        a = row["ibsm"]
        if single_vl_ok(a) and (best is None or a["all_to_all_max"] < best[1]):
            best = (engine_cell(row), a["all_to_all_max"])
        if row["engine"] == "dfsssp" and o is not None and row["osm"]["used"] == "dfsssp":
            osm_dfsssp = o
    best_s = "%s %d" % best if best else "none"
    if osm_dfsssp is not None:
        dfs = "%s (%d VL)" % (busiest(osm_dfsssp), osm_dfsssp["vls"])
    else:
        dfs = "-"
    ratio = "%.2f" % (best[1] / osm_dfsssp["all_to_all_max"]) if best and osm_dfsssp else "-"
    return "| " + " | ".join([name] + cells + [best_s, dfs, ratio]) + " |"


def summary(results, args, out):
    """The closing table: every fabric's busiest links side by side."""
    if not results:
        return
    heads = ["fabric"] + args.engines + ["ibsm best single-VL deadlock-free", "OpenSM dfsssp", "ratio"]
    lines = ["### Summary: busiest link (all-to-all max, OpenSM / ibsm)", "",
             "| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    lines += [summary_row(name, rows) for name, rows in results]
    lines += ["",
              "`*` credit loops (not deadlock-free), `!` some end-port pair not delivered, `?` OpenSM's path SLs "
              "unknown; `(engine)` after OpenSM's figure: the engine OpenSM fell back to; after auto's: the engine "
              "auto picked. \"ibsm best single-VL deadlock-free\": the lowest busiest link among ibsm's rows that "
              "deliver every end-port pair deadlock-free on one VL (ibsm at %d VL%s); ratio: that over OpenSM's "
              "dfsssp on %d VLs (below 1: ibsm's is less loaded)." % (
                  args.ibsm_vls, "" if args.ibsm_vls == 1 else "s", args.osm_vls), ""]
    emit("\n".join(lines), out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ibsm", default=os.path.join(ROOT, "target", "release", "ibsm"))
    ap.add_argument("--fabrics", default=None, help="comma list of: %s (default: %s)" % (
        ", ".join(ALL_FABRICS), ", ".join(FABRICS)))
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--large", action="store_true", help="add the 11,664-host 3-level fat tree")
    ap.add_argument("--degraded", action="store_true",
                    help="add the degraded fat trees (%s)" % ", ".join(DEGRADED))
    ap.add_argument("--irregular", action="store_true",
                    help="add the irregular fabrics for single-VL routing (%s)" % ", ".join(IRREGULAR))
    ap.add_argument("--issue12", action="store_true",
                    help="issue 12's set: the default fabrics (unless --fabrics), --degraded and --irregular")
    ap.add_argument("--max-vls", type=int, default=DEFAULT_MAX_VLS,
                    help="data VLs for the engines, 1-15 (default %d); OpenSM gets the largest of 1, 2, 4, 8 "
                         "not above it" % DEFAULT_MAX_VLS)
    ap.add_argument("--single-vl", action="store_true",
                    help="ibsm's engines with --max-vls 1, OpenSM's with --max-vls as usual")
    ap.add_argument("--shifts", type=int, default=None,
                    help="evaluate at most N shifts per fabric (default: all; 512 on --large fabrics)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per OpenSM run")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--out", help="also append the tables to this file")
    args = ap.parse_args()
    if not 1 <= args.max_vls <= 15:
        raise SystemExit("--max-vls must be 1-15 (IBA: VL15 is for management)")
    args.osm_vls = osm_vls(args.max_vls)
    args.ibsm_vls = 1 if args.single_vl else args.max_vls
    if not os.access(args.ibsm, os.X_OK):
        raise SystemExit("%s not found; build it with cargo build --release" % args.ibsm)
    for tool in ("ibsim", "opensm"):
        if not shutil.which(tool):
            raise SystemExit("%s is not installed" % tool)
    names = [n for n in (args.fabrics if args.fabrics is not None else ",".join(FABRICS)).split(",") if n]
    extra = []
    if args.large:
        extra += list(LARGE)
    if args.degraded or args.issue12:
        extra += list(DEGRADED)
    if args.irregular or args.issue12:
        extra += list(IRREGULAR)
    names += [n for n in extra if n not in names]
    unknown = [n for n in names if n not in ALL_FABRICS]
    if unknown:
        raise SystemExit("unknown fabric %s" % ", ".join(unknown))
    args.engines = [e for e in args.engines.split(",") if e]
    work = tempfile.mkdtemp(prefix="ibsm-routing-bench-")
    out = open(args.out, "a") if args.out else None
    ver = re.search(r"OpenSM \S+", run(["opensm", "--version"]).stdout + run(["opensm", "--version"]).stderr)
    osm_name = ver.group(0) if ver else "OpenSM"
    if args.osm_vls == args.ibsm_vls:
        head = "## Routing: %s vs ibsm (%s), max VLs %d\n" % (osm_name, time.strftime("%Y-%m-%d"), args.ibsm_vls)
    else:
        head = "## Routing: %s with %d VLs vs ibsm with %d VL%s (%s)%s\n" % (
            osm_name, args.osm_vls, args.ibsm_vls, "" if args.ibsm_vls == 1 else "s", time.strftime("%Y-%m-%d"),
            ", --single-vl: ibsm's engines on one VL next to OpenSM's dfsssp and nue on several"
            if args.single_vl else "")
    if args.osm_vls != args.max_vls:
        head += "\nOpenSM runs with %d data VLs: OperationalVLs steps are 1, 2, 4, 8, 15 and ibsim's ports hold " \
                "at most 8 (--max-vls %d).\n" % (args.osm_vls, args.max_vls)
    emit(head, out)
    results = []
    try:
        for name in names:
            spec, cut = ALL_FABRICS[name]
            shifts = args.shifts if args.shifts is not None else (512 if name in LARGE else None)
            args.analysis_flags = ["--shifts", str(shifts)] if shifts else []
            shape, rows = bench_fabric(name, spec, cut, args, work)
            report(name, spec, cut, shape, rows, args, out)
            results.append((name, rows))
    finally:
        # Also after a failure, so a long run keeps the fabrics it finished.
        summary(results, args, out)
        if args.keep:
            log("work directory: %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
