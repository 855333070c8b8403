#!/usr/bin/env python3
"""Failover benchmark: a master SM is killed (SIGKILL), a standby takes over.

For each fabric and each pair master -> standby (OpenSM->OpenSM,
OpenSM->ibsm, ibsm->ibsm, ibsm->OpenSM), twice (both SMs on their default
polling, then both on the same short polling), in one run on ibsim:

  1. a fresh ibsim; the master (priority 10) on one host, until it logs
     SUBNET UP; the standby (priority 5) on another host, until it logs
     STANDBY and `sminfo <its LID>` answers SMINFO_STANDBY;
  2. every port's LID (`ibnetdiscover -p`) and every cabled port ACTIVE
     (`iblinkinfo`), from a third host no SM runs on;
  3. SIGKILL the master; the time from the kill to the standby's MASTER
     state and to its SUBNET UP (from its log's timestamps);
  4. the SMPs the new master wrote from the kill to its SUBNET UP, by method
     and attribute, counted by an LD_PRELOAD shim (built from the C source
     below) in front of libumad2sim that records each MAD with its time; for
     ibsm also its own "takeover programmed" line;
  5. LIDs compared with step 2, every cabled port ACTIVE again, `sminfo`
     naming the new master.

Nothing here asserts a time: the figures are printed, and what went wrong
(no takeover, LIDs changed, ports not ACTIVE) is printed beside them.

usage: bench/failover.py [--fabrics ft648,irregular40] [--modes default,short]
                         [--pairs opensm-opensm,opensm-ibsm,ibsm-ibsm,ibsm-opensm]
"""
import argparse
import atexit
import datetime
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
sys.dont_write_bytecode = True  # no bench/__pycache__ from importing bringup
sys.path.insert(0, HERE)
from bringup import UMAD2SIM, ATTR_NAMES, METHOD_NAMES, sim_env, start_ibsim, wait_attachable  # noqa: E402
from common import PROCS, fabric_files, fmt, kill_started_processes_on_exit, ratio  # noqa: E402

FABRICS = {
    "ft648": "fattree2:radix=36,leaves=36,spines=18,hosts=18",
    "irregular40": "random:switches=40,degree=4,hosts=80,seed=1",
}
PAIRS = ["opensm-opensm", "opensm-ibsm", "ibsm-ibsm", "ibsm-opensm"]
# Standby polling: None = each SM's own defaults (OpenSM 10000 ms x 4,
# ibsm 2000 ms x 4); otherwise (interval ms, misses) given to both.
MODES = {"default": None, "short": (1000, 3)}
DEFAULT_POLL = {"opensm": (10000, 4), "ibsm": (2000, 4)}
MASTER_PRIO, STANDBY_PRIO = 10, 5
BRING_UP_CAP = 120.0
STANDBY_CAP = 60.0
SETTLE = 2.0  # seconds between the standby's checks and the kill
TAKEOVER_MARGIN = 60.0  # on top of the standby's configured detection time

# Like bench/madcount.c, but each SMP written is appended at once, with its
# CLOCK_REALTIME, to $MADREC_OUT as a 16-byte record (ns, class, method,
# attr): the counts of any time window can be read while the SM runs, and an
# SM killed with SIGKILL loses nothing.
MADREC_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static ssize_t (*next_write)(int, const void *, size_t);
static int out_fd = -2;

struct rec { int64_t ns; uint8_t cls, method; uint16_t attr; uint32_t pad; };

static int looks_like_smp(const uint8_t *m)
{
	return m[0] == 1 && (m[1] == 0x01 || m[1] == 0x81);
}

ssize_t write(int fd, const void *buf, size_t count)
{
	if (!next_write)
		next_write = dlsym(RTLD_NEXT, "write");
	const uint8_t *b = buf;
	const uint8_t *mad = NULL;
	if (fd != out_fd) {
		if (count >= 64 + 24 && looks_like_smp(b + 64))
			mad = b + 64;
		else if (count >= 56 + 24 && looks_like_smp(b + 56))
			mad = b + 56;
	}
	if (mad) {
		if (out_fd == -2) {
			const char *p = getenv("MADREC_OUT");
			out_fd = p ? (int)syscall(SYS_openat, AT_FDCWD, p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
		}
		if (out_fd >= 0) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			struct rec r = { (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec, mad[1], mad[3],
					 (uint16_t)((mad[16] << 8) | mad[17]), 0 };
			syscall(SYS_write, out_fd, &r, sizeof r);
		}
	}
	return next_write(fd, buf, count);
}
"""

kill_started_processes_on_exit()


def build_shim(workdir):
    src = os.path.join(workdir, "madrec.c")
    so = os.path.join(workdir, "madrec.so")
    with open(src, "w") as f:
        f.write(MADREC_C)
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", so, src, "-ldl"], check=True)
    return so


def read_records(path, t0, t1):
    """Counts (method, attribute) of the SMPs recorded in [t0, t1] (seconds)."""
    counts = {}
    if not os.path.exists(path):
        return counts
    data = open(path, "rb").read()
    lo, hi = int(t0 * 1e9), int(t1 * 1e9)
    for ns, _cls, method, attr, _ in struct.iter_unpack("<qBBHI", data[: len(data) // 16 * 16]):
        if lo <= ns <= hi:
            key = (METHOD_NAMES.get(method, hex(method)), ATTR_NAMES.get(attr, str(attr)))
            counts[key] = counts.get(key, 0) + 1
    return counts


# ---------------------------------------------------------------------------
# Logs

OSM_TS = re.compile(r"^(\w{3} +\d+ \d\d:\d\d:\d\d) (\d{6}) ")
IBSM_TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)Z")


def line_time(line):
    """The wall-clock time (epoch seconds) a log line carries, or None."""
    m = IBSM_TS.match(line)
    if m:
        dt = datetime.datetime.fromisoformat(m.group(1)).replace(tzinfo=datetime.timezone.utc)
        return dt.timestamp()
    m = OSM_TS.match(line)
    if m:
        year = time.localtime().tm_year
        st = time.strptime(f"{year} {m.group(1)}", "%Y %b %d %H:%M:%S")
        return time.mktime(st) + int(m.group(2)) / 1e6
    return None


class Sm:
    MASTER = {"opensm": "Entering MASTER state", "ibsm": "SM state MASTER"}
    STANDBY = {"opensm": "Entering STANDBY state", "ibsm": "SM state STANDBY"}

    def __init__(self, kind, role, host, priority, poll, work, sock, shim, ibsm):
        self.kind, self.role, self.host = kind, role, host
        self.dir = os.path.join(work, f"{role}-{kind}")
        os.makedirs(self.dir, exist_ok=True)
        self.log = os.path.join(self.dir, "log")
        self.rec = os.path.join(self.dir, "smps.rec")
        env = sim_env(sock, host, {"LD_PRELOAD": f"{shim} {UMAD2SIM}", "MADREC_OUT": self.rec,
                                   "OSM_TMP_DIR": self.dir, "OSM_CACHE_DIR": self.dir})
        if kind == "opensm":
            conf = os.path.join(self.dir, "opensm.conf")
            subprocess.run(["opensm", "-c", conf], capture_output=True, check=True)
            if poll:
                edit_conf(conf, {"sminfo_polling_timeout": str(poll[0]), "polling_retry_number": str(poll[1])})
            cmd = ["opensm", "-p", str(priority), "-d2", "-F", conf, "-f", self.log]
        else:
            cmd = [ibsm, "run", "--priority", str(priority), "--cache-dir", self.dir, "--log-file", self.log,
                   "--metrics-listen", ""]
            if poll:
                cmd += ["--sminfo-polling-timeout", str(poll[0]), "--polling-retry-number", str(poll[1])]
        self.poll = poll or DEFAULT_POLL[kind]
        out = open(os.path.join(self.dir, "stdout"), "w")
        self.started = time.time()
        self.proc = subprocess.Popen(cmd, env=env, cwd=self.dir, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        PROCS.append(self.proc)

    def text(self):
        try:
            return open(self.log, errors="replace").read()
        except FileNotFoundError:
            return ""

    def lines_with(self, needle, since=0):
        """(time, line) of each log line at or after byte `since` containing needle."""
        return [(line_time(l), l) for l in self.text()[since:].splitlines() if needle in l]

    def wait_for(self, needle, cap, count_before=0):
        """Waits until the log has more than count_before lines with needle;
        returns the time it was seen (this clock), or None after cap seconds
        or if the SM exited."""
        deadline = time.time() + cap
        while time.time() < deadline:
            if len(self.lines_with(needle)) > count_before:
                return time.time()
            if self.proc.poll() is not None:
                return None
            time.sleep(0.05)
        return None

    def kill(self):
        self.proc.kill()
        at = time.time()
        self.proc.wait()
        return at

    def tail(self, n=15):
        return "\n".join(self.text().splitlines()[-n:])


def edit_conf(path, edits):
    lines = open(path).read().splitlines()
    seen = set()
    for i, l in enumerate(lines):
        k = l.split()[0] if l.split() else ""
        if k in edits:
            lines[i] = f"{k} {edits[k]}"
            seen.add(k)
    missing = set(edits) - seen
    if missing:
        raise SystemExit(f"OpenSM's default configuration has no {missing}")
    open(path, "w").write("\n".join(lines) + "\n")


# ---------------------------------------------------------------------------
# Diags from the observer host

class Diags:
    def __init__(self, sock, host, work, cabled):
        self.env = sim_env(sock, host, {"LD_PRELOAD": UMAD2SIM})
        self.dir = os.path.join(work, "diags")
        os.makedirs(self.dir, exist_ok=True)
        self.cabled = cabled

    def run(self, *args, timeout=120):
        try:
            r = subprocess.run(list(args), env=self.env, cwd=self.dir, capture_output=True, text=True, timeout=timeout)
            return r.returncode, r.stdout + r.stderr
        except subprocess.TimeoutExpired:
            return -1, f"{args[0]} timed out"

    def ports(self):
        """{port GUID: (LID, node name)} from ibnetdiscover -p."""
        code, text = self.run("ibnetdiscover", "-p")
        out = {}
        for line in text.splitlines():
            f = line.split()
            if len(f) < 4 or f[0] not in ("CA", "SW", "RT"):
                continue
            m = re.search(r"\( '([^']*)'", line)
            out[int(f[3], 16)] = (int(f[1]), m.group(1) if m else "")
        return code, out

    def inactive(self):
        code, text = self.run("iblinkinfo")
        if code != 0:
            return [f"iblinkinfo failed: {text.strip()[:200]}"]
        cabled = [l for l in text.splitlines() if "==(" in l and '[  ] "" (' not in l]
        bad = [l.strip() for l in cabled if "Active/" not in l]
        if len(cabled) != self.cabled:
            bad.append(f"iblinkinfo shows {len(cabled)} cabled ports, the fabric has {self.cabled}")
        return bad

    def sminfo(self, lid=None):
        """(lid, guid, state) of `sminfo [lid]`, or None."""
        code, text = self.run("sminfo", *([str(lid)] if lid is not None else []), timeout=30)
        m = re.search(r"sm lid (\d+) sm guid 0x([0-9a-f]+).*state (\d)", text)
        if code != 0 or not m:
            return None
        return int(m.group(1)), int(m.group(2), 16), int(m.group(3))


# ---------------------------------------------------------------------------
# One scenario

def scenario(fabric, spec, pair, mode, ibsm, shim, keep):
    master_kind, standby_kind = pair.split("-")
    poll = MODES[mode]
    work = tempfile.mkdtemp(prefix=f"ibsm-failover-{fabric}-{pair}-{mode}-")
    net, flags, hosts, links = fabric_files(spec, ibsm, work)
    m_host, s_host, obs_host = hosts[0], hosts[len(hosts) // 2], hosts[-1]
    sock = f"fo{os.getpid()}{fabric}{pair}{mode}"
    r = {"fabric": fabric, "pair": pair, "mode": mode, "problems": []}
    sim = start_ibsim(net, sock, flags, work)
    PROCS.append(sim)
    sms = []
    try:
        for h in (m_host, s_host, obs_host):
            wait_attachable(sock, h, work)
        diags = Diags(sock, obs_host, work, links * 2)

        master = Sm(master_kind, "master", m_host, MASTER_PRIO, poll, work, sock, shim, ibsm)
        sms.append(master)
        if master.wait_for("SUBNET UP", BRING_UP_CAP) is None:
            r["problems"].append(f"master {master_kind} no SUBNET UP in {BRING_UP_CAP:.0f} s:\n{master.tail()}")
            return r
        r["bring_up"] = time.time() - master.started

        standby = Sm(standby_kind, "standby", s_host, STANDBY_PRIO, poll, work, sock, shim, ibsm)
        sms.append(standby)
        if standby.wait_for(Sm.STANDBY[standby_kind], STANDBY_CAP) is None:
            r["problems"].append(f"standby {standby_kind} not STANDBY in {STANDBY_CAP:.0f} s:\n{standby.tail()}")
            return r
        r["to_standby"] = time.time() - standby.started
        code, before = diags.ports()
        by_name = {name: lid for lid, name in before.values()}
        s_lid, m_lid = by_name.get(s_host), by_name.get(m_host)
        info = diags.sminfo(s_lid) if s_lid else None
        if not info or info[2] != 2:
            r["problems"].append(f"sminfo {s_lid} (standby) answered {info}, not STANDBY")
        info = diags.sminfo()
        if not info or info[0] != m_lid or info[2] != 3:
            r["problems"].append(f"sminfo before the kill answered {info}, master is at LID {m_lid}")
        bad = diags.inactive()
        if bad:
            r["problems"].append(f"before the kill, {len(bad)} ports not ACTIVE: {bad[:3]}")
        if standby.lines_with("SUBNET UP") or standby.proc.poll() is not None:
            r["problems"].append("standby logged SUBNET UP or exited before the kill")
        r["ports"] = len(before)
        # Let the standby settle into its polling before the kill.
        time.sleep(SETTLE)

        # The standby's own SMPs while it stood by, as a reference rate.
        since = len(standby.text())
        ups_before = len(standby.lines_with("SUBNET UP"))
        t_kill = master.kill()
        detect = standby.poll[0] * standby.poll[1] / 1000.0
        r["detect_cfg"] = detect
        seen_up = standby.wait_for("SUBNET UP", detect + TAKEOVER_MARGIN, ups_before)
        masters = standby.lines_with(Sm.MASTER[standby_kind], since)
        if masters:
            r["to_master"] = (masters[0][0] or time.time()) - t_kill
        if seen_up is None:
            r["problems"].append(
                f"standby {standby_kind} no SUBNET UP within {detect + TAKEOVER_MARGIN:.0f} s of the kill"
                f" (MASTER logged: {bool(masters)}):\n{standby.tail()}")
            t_up = time.time()
        else:
            ups = standby.lines_with("SUBNET UP", since)
            t_log = ups[0][0] if ups else None
            # The log's own timestamp when it is plausible, else when we saw it.
            t_up = t_log if t_log is not None and t_kill - 1 <= t_log <= seen_up + 1 else seen_up
            r["to_up"] = t_up - t_kill
        r["counts"] = read_records(standby.rec, t_kill, t_up)
        prog = standby.lines_with("takeover programmed", since)
        if prog:
            r["takeover"] = dict(re.findall(r"(\w+)=(\d+)", prog[0][1]))

        time.sleep(1.0)
        code, after = diags.ports()
        changed = [(hex(g), before[g][0], after.get(g, (None,))[0]) for g in before
                   if g not in after or after[g][0] != before[g][0]]
        # The dead master's port keeps its LID in ibsim; ports reached before
        # but not after are reported, as are new ones.
        changed += [(hex(g), None, after[g][0]) for g in after if g not in before]
        r["lid_changes"] = len(changed)
        if changed:
            r["problems"].append(f"{len(changed)} LIDs changed (guid, before, after): {changed[:5]}")
        bad = diags.inactive()
        r["inactive"] = len(bad)
        if bad:
            r["problems"].append(f"after the takeover, {len(bad)} ports not ACTIVE: {bad[:3]}")
        info = diags.sminfo()
        r["sminfo_ok"] = bool(info and info[0] == s_lid and info[2] == 3)
        if not r["sminfo_ok"]:
            r["problems"].append(f"sminfo after the takeover answered {info}; the new master is at LID {s_lid}")
        if standby.proc.poll() is not None:
            r["problems"].append(f"new master {standby_kind} exited:\n{standby.tail()}")
        return r
    finally:
        for sm in sms:
            if sm.proc.poll() is None:
                sm.kill()
        sim.kill()
        sim.wait()
        r["work"] = work
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------
# Report

def total(counts, method=None):
    return sum(n for (m, _), n in counts.items() if method is None or m == method)


def sub(a, b):
    return None if a is None or b is None else a - b


def report(fabric, spec, mode, results):
    poll = MODES[mode]
    how = ("each SM's defaults: OpenSM 10000 ms x 4, ibsm 2000 ms x 4" if poll is None
           else f"both SMs {poll[0]} ms x {poll[1]}")
    print(f"### {fabric}: {spec}, polling {how}")
    print()
    print("| master -> standby | detection configured (s) | kill to MASTER (s) | MASTER to SUBNET UP (s) | kill to SUBNET UP (s) "
          "| SMPs sent | Sets | PortInfo Sets | LFT Sets | LFT Gets | LIDs changed | ports not ACTIVE | ibsm takeover line |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        c = r.get("counts", {})
        tk = r.get("takeover")
        tks = (f"sets={tk.get('sets')} changing={tk.get('changing_sets')} sm_lid_only={tk.get('sm_lid_only_sets')}"
               f" lft_reads={tk.get('lft_reads')} lft_blocks={tk.get('lft_blocks')}") if tk else ""
        print(f"| {r['pair'].replace('-', ' -> ').replace('opensm', 'OpenSM')} | {fmt(r.get('detect_cfg'))} "
              f"| {fmt(r.get('to_master'), 2)} | {fmt(sub(r.get('to_up'), r.get('to_master')), 2)} | {fmt(r.get('to_up'), 2)} | {total(c) if 'counts' in r else '—'} "
              f"| {total(c, 'Set') if 'counts' in r else '—'} | {c.get(('Set', 'PortInfo'), 0)} "
              f"| {c.get(('Set', 'LFT'), 0)} | {c.get(('Get', 'LFT'), 0)} | {r.get('lid_changes', '—')} "
              f"| {r.get('inactive', '—')} | {tks} |")
    print()
    by = {r["pair"]: r for r in results}

    def row(label, a, b):
        ra, rb = by.get(a, {}), by.get(b, {})
        ca, cb = ra.get("counts"), rb.get("counts")
        print(f"| {label} | {ratio(ra.get('to_up'), rb.get('to_up'))} "
              f"| {ratio(total(ca) if ca is not None else None, total(cb) if cb is not None else None)} "
              f"| {ratio(total(ca, 'Set') if ca is not None else None, total(cb, 'Set') if cb is not None else None)} |")

    print("| ratio ibsm / OpenSM | kill to SUBNET UP | SMPs | Sets |")
    print("|---|---|---|---|")
    row("ibsm -> ibsm / OpenSM -> OpenSM", "ibsm-ibsm", "opensm-opensm")
    row("OpenSM -> ibsm / OpenSM -> OpenSM (new master)", "opensm-ibsm", "opensm-opensm")
    row("ibsm -> ibsm / ibsm -> OpenSM (new master)", "ibsm-ibsm", "ibsm-opensm")
    print()
    keys = sorted({k for r in results for k in r.get("counts", {})})
    if keys:
        print("| SMPs from the kill to SUBNET UP, by method and attribute | "
              + " | ".join(r["pair"].replace("-", " -> ").replace("opensm", "OpenSM") for r in results) + " |")
        print("|---|" + "---|" * len(results))
        for k in keys:
            print(f"| {k[0]} {k[1]} | " + " | ".join(str(r.get("counts", {}).get(k, 0)) for r in results) + " |")
        print()
    for r in results:
        for p in r["problems"]:
            print(f"- **{r['pair']}**: {p}")
    if any(r["problems"] for r in results):
        print()
    sys.stdout.flush()


def split_fabrics(text):
    """Names of FABRICS or generator specs, comma-separated: a piece with no
    `:` that is not a name continues the spec before it (`fattree2:radix=8,hosts=4`)."""
    out = []
    for piece in text.split(","):
        if out and ":" not in piece and piece not in FABRICS:
            out[-1] += "," + piece
        else:
            out.append(piece)
    return [p for p in out if p]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fabrics", default="ft648,irregular40")
    ap.add_argument("--modes", default="default,short")
    ap.add_argument("--pairs", default=",".join(PAIRS))
    ap.add_argument("--ibsm", default=os.path.join(ROOT, "target", "release", "ibsm"))
    ap.add_argument("--keep", action="store_true", help="keep the work directories (logs, SMP records)")
    args = ap.parse_args()
    shimdir = tempfile.mkdtemp(prefix="ibsm-failover-shim-")
    atexit.register(shutil.rmtree, shimdir, True)
    shim = build_shim(shimdir)
    t0 = time.time()
    for fabric in split_fabrics(args.fabrics):
        spec = FABRICS.get(fabric, fabric)
        for mode in args.modes.split(","):
            results = []
            for pair in args.pairs.split(","):
                r = scenario(fabric, spec, pair, mode, args.ibsm, shim, args.keep)
                results.append(r)
                print(f"  [{time.time() - t0:6.0f} s] {fabric} {mode} {pair}: kill to MASTER "
                      f"{fmt(r.get('to_master'), 2)} s, to SUBNET UP {fmt(r.get('to_up'), 2)} s, "
                      f"{len(r['problems'])} problems{', kept in ' + r['work'] if args.keep else ''}",
                      file=sys.stderr, flush=True)
            report(fabric, spec, mode, results)
    print(f"total run time {time.time() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
