#!/usr/bin/env python3
"""The SM as a service, with its performance manager on: CPU and memory
during bring-up and at rest, OpenSM (`--perfmgr`) and ibsm on the same
ibsim fabric in one run; ibsm's /metrics response time and size there and
on a larger in-process fabric; and the rate at which `perfquery`, the tool
an operator would script otherwise, reads port counters on the same
fabric.

CPU is utime+stime of the SM process from /proc (both SMs measured the
same way); RSS is VmRSS sampled every 0.5 s (peak and at the end of the
rest period). "Bring-up" is SM start to SUBNET UP in its log; "rest" is the
`--rest` seconds after it, with light sweeps every 10 s and a performance
manager cycle every `--perf-interval` s for both.

usage: bench/ops.py [--spec fattree3:radix=36,pods=12] [--rest 60]
                    [--perf-interval 10] [--inproc fattree3:radix=36,pods=36]
                    [--inproc-only] [--port-series errors,all]

`--port-series` names the `[perfmgr] port_series` settings the in-process
fabric's /metrics is measured with, each in its own run; `/dump/port-counters`
(every port's every counter) is timed and sized beside.
"""
import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

UMAD2SIM = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICK = os.sysconf("SC_CLK_TCK")


def sim_env(sock, host, preload=True):
    env = dict(os.environ)
    env.update({"IBSIM_SOCKNAME": sock, "SIM_HOST": host})
    if preload:
        env["LD_PRELOAD"] = UMAD2SIM
    return env


def build_shim(work):
    """bench/madcount.c: counts the MADs a process sends, by class, method and attribute."""
    so = os.path.join(work, "madcount.so")
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", so, os.path.join(ROOT, "bench", "madcount.c"), "-ldl",
                    "-lpthread"], check=True)
    return so


def perf_mads(path):
    """PerfMgt (class 0x04) requests sent, from a madcount file."""
    n = 0
    if os.path.exists(path):
        for line in open(path):
            c, m, _a, k = (int(x) for x in line.split())
            n += k if c == 0x04 and m in (0x01, 0x02) else 0
    return n


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_mib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return 0.0


def wait_attachable(sock, host, cwd, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = subprocess.run(["smpquery", "-D", "nodeinfo", "0"], env=sim_env(sock, host), cwd=cwd, capture_output=True)
        if r.returncode == 0:
            return
        time.sleep(0.5)
    raise SystemExit(f"ibsim on {sock} did not become attachable")


def watch(proc, log, rest, up_needle="SUBNET UP", limit=600):
    """Samples the SM until SUBNET UP, then `rest` more seconds."""
    t0 = time.monotonic()
    peak = 0.0
    up_at = up_cpu = None
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"{proc.args[0]} exited with {proc.returncode}; log {log}")
        peak = max(peak, rss_mib(proc.pid))
        now = time.monotonic() - t0
        if up_at is None:
            text = open(log, errors="replace").read() if os.path.exists(log) else ""
            if up_needle in text:
                up_at, up_cpu, up_rss = now, cpu_seconds(proc.pid), rss_mib(proc.pid)
            elif now > limit:
                raise SystemExit(f"no {up_needle} in {log} after {limit} s")
        elif now - up_at >= rest:
            cpu = cpu_seconds(proc.pid)
            return {"up_s": up_at, "up_cpu": up_cpu, "up_rss": up_rss, "rest_cpu": cpu - up_cpu,
                    "rest_s": now - up_at, "peak_rss": peak, "rest_rss": rss_mib(proc.pid)}
        time.sleep(0.5)


def fetch(url, accept=None):
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=30) as r:
        body = r.read()
    return time.monotonic() - t0, body


def metrics_figures(port, n=20):
    url = f"http://127.0.0.1:{port}/metrics"
    times, size, text = [], 0, ""
    for _ in range(n):
        dt, body = fetch(url)
        times.append(dt)
        size, text = len(body), body.decode()
    series = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    per_port = sum(1 for line in text.splitlines() if line.startswith("ibsm_port_"))
    return {"median_ms": statistics.median(times) * 1e3, "max_ms": max(times) * 1e3, "bytes": size,
            "series": series, "port_series": per_port, "text": text}


def sample(text, name, **labels):
    total, found = 0.0, False
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        series, value = line.rsplit(" ", 1)
        if series.split("{")[0] != name or not all(f'{k}="{v}"' in series for k, v in labels.items()):
            continue
        total += float(value)
        found = True
    return total if found else None


def wait_perf_cycle(port, cycles=2, limit=300):
    """Waits until the performance manager has finished `cycles` cycles."""
    deadline = time.time() + limit
    while time.time() < deadline:
        _, body = fetch(f"http://127.0.0.1:{port}/metrics")
        text = body.decode()
        polled = sample(text, "ibsm_perfmgr_ports", outcome="polled") or 0
        if (sample(text, "ibsm_perfmgr_cycles_total") or 0) >= cycles and polled > 0:
            return text
        time.sleep(1)
    raise SystemExit("the performance manager did not finish its cycles")


def perfquery_rate(sock, host, cwd, lids, n=100):
    """Ports read per second by perfquery, one process per port, as a script would."""
    env = sim_env(sock, host)
    t0 = time.monotonic()
    ok = 0
    for lid in lids[:n]:
        r = subprocess.run(["perfquery", str(lid), "1"], env=env, cwd=cwd, capture_output=True, timeout=60)
        ok += r.returncode == 0
    dt = time.monotonic() - t0
    return {"ports": ok, "asked": min(n, len(lids)), "s": dt, "rate": ok / dt}


def stop(proc):
    """SIGTERM, then SIGKILL: a umad2sim client can hang in its exit."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_sm(kind, spec, ibsm, rest, perf_interval, work, shim):
    net, flags, hosts, links = common.fabric_files(spec, ibsm, work)
    host = subprocess.run([ibsm, "topology", "sm-node", spec], capture_output=True, text=True, check=True).stdout.strip()
    sock = f"ops{os.getpid()}{kind}"
    smdir = os.path.join(work, kind)
    os.makedirs(smdir, exist_ok=True)
    sim = subprocess.Popen(["ibsim", "-s"] + flags + [net], stdin=subprocess.PIPE,
                           stdout=open(os.path.join(smdir, "ibsim.log"), "w"), stderr=subprocess.STDOUT,
                           env=sim_env(sock, "", preload=False), cwd=smdir)
    common.PROCS.append(sim)
    try:
        wait_attachable(sock, host, smdir)
        log = os.path.join(smdir, "log")
        env = sim_env(sock, host)
        counts = os.path.join(smdir, "madcount")
        env.update({"OSM_TMP_DIR": smdir, "OSM_CACHE_DIR": smdir, "LD_PRELOAD": f"{shim} {UMAD2SIM}",
                    "MADCOUNT_OUT": counts})
        port = free_port()
        if kind == "opensm":
            cmd = ["opensm", "-d2", "-f", log, "-s", "10", "--perfmgr", "--perfmgr_sweep_time_s", str(perf_interval)]
        else:
            conf = os.path.join(smdir, "ibsm.toml")
            open(conf, "w").write(f'[sm]\nsweep_interval_s = 10\n\n[metrics]\nlisten = "127.0.0.1:{port}"\n\n'
                                  f'[perfmgr]\nenabled = true\ninterval_s = {perf_interval}\n')
            cmd = [ibsm, "run", "--config", conf, "--cache-dir", smdir, "--log-file", log]
        proc = subprocess.Popen(cmd, env=env, cwd=smdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        common.PROCS.append(proc)
        r = watch(proc, log, rest)
        r.update({"hosts": len(hosts), "links": links})
        if kind == "ibsm":
            # At the end of the rest period, as OpenSM's count is (it stops then).
            _, body = fetch(f"http://127.0.0.1:{port}/metrics")
            r["perf_mads_at_rest_end"] = sample(body.decode(), "ibsm_mads_sent_total", **{"class": "Perf"})
            text = wait_perf_cycle(port)
            r["perf_cycle_s"] = sample(text, "ibsm_perfmgr_last_cycle_duration_seconds")
            r["perf_ports"] = sample(text, "ibsm_perfmgr_ports", outcome="polled")
            r["metrics"] = metrics_figures(port)
            lids = list(range(1, len(hosts) + 1))
            r["perfquery"] = perfquery_rate(sock, host, smdir, lids)
        stop(proc)
        r["perf_mads"] = r.get("perf_mads_at_rest_end", perf_mads(counts))
        return r
    finally:
        sim.kill()
        sim.wait()


def inproc_metrics(spec, ibsm, perf_interval, work, port_series="errors"):
    port = free_port()
    smdir = os.path.join(work, "inproc-" + port_series)
    os.makedirs(smdir, exist_ok=True)
    conf = os.path.join(smdir, "ibsm.toml")
    open(conf, "w").write(f'[sm]\nsweep_interval_s = 10\n\n[metrics]\nlisten = "127.0.0.1:{port}"\n\n'
                          f'[perfmgr]\nenabled = true\ninterval_s = {perf_interval}\n'
                          f'port_series = "{port_series}"\n')
    log = os.path.join(smdir, "log")
    proc = subprocess.Popen([ibsm, "run", "--sim", spec, "--config", conf, "--log-file", log],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=smdir)
    common.PROCS.append(proc)
    try:
        watch(proc, log, 0)
        text = wait_perf_cycle(port, cycles=1)
        m = metrics_figures(port)
        m["perf_ports"] = sample(text, "ibsm_perfmgr_ports", outcome="polled")
        dt, body = fetch(f"http://127.0.0.1:{port}/dump/port-counters")
        m["dump_ms"], m["dump_bytes"], m["dump_lines"] = dt * 1e3, len(body), body.count(b"\n") - 1
        m["rss"] = rss_mib(proc.pid)
        return m
    finally:
        stop(proc)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", default="fattree3:radix=36,pods=12")
    ap.add_argument("--inproc", default="fattree3:radix=36,pods=36")
    ap.add_argument("--rest", type=float, default=60)
    ap.add_argument("--perf-interval", type=int, default=10)
    ap.add_argument("--ibsm", default=os.path.join(ROOT, "target", "release", "ibsm"))
    ap.add_argument("--inproc-only", action="store_true", help="only the in-process /metrics figures")
    ap.add_argument("--port-series", default="errors,all")
    args = ap.parse_args()
    common.kill_started_processes_on_exit()
    work = tempfile.mkdtemp(prefix="ibsm-ops-")
    if args.inproc_only:
        print("| ibsm | figure |")
        print("|---|---|")
        inproc_rows(args, work)
        shutil.rmtree(work, ignore_errors=True)
        return
    shim = build_shim(work)
    o = run_sm("opensm", args.spec, args.ibsm, args.rest, args.perf_interval, work, shim)
    i = run_sm("ibsm", args.spec, args.ibsm, args.rest, args.perf_interval, work, shim)
    print(f"## {args.spec} on ibsim: {i['hosts']} hosts, {i['links']} links; light sweeps every 10 s, "
          f"performance manager every {args.perf_interval} s")
    print("| | OpenSM | ibsm | ibsm/OpenSM |")
    print("|---|---|---|---|")
    rows = [
        ("time to SUBNET UP (s)", o["up_s"], i["up_s"], 2),
        ("CPU during bring-up (s)", o["up_cpu"], i["up_cpu"], 2),
        (f"CPU at rest, {args.rest:.0f} s (s)", o["rest_cpu"], i["rest_cpu"], 2),
        ("CPU at rest (% of a core)", 100 * o["rest_cpu"] / o["rest_s"], 100 * i["rest_cpu"] / i["rest_s"], 1),
        ("RSS at SUBNET UP (MiB)", o["up_rss"], i["up_rss"], 1),
        ("peak RSS (MiB)", o["peak_rss"], i["peak_rss"], 1),
        ("RSS at rest (MiB)", o["rest_rss"], i["rest_rss"], 1),
    ]
    rows.append(("PerfMgt requests sent, start to end of rest", o["perf_mads"], i["perf_mads"], 0))
    for name, a, b, d in rows:
        print(f"| {name} | {common.fmt(a, d)} | {common.fmt(b, d)} | {common.ratio(b, a)} |")
    m, pq = i["metrics"], i["perfquery"]
    print()
    print("| ibsm | figure |")
    print("|---|---|")
    print(f"| performance manager cycle | {common.fmt(i['perf_ports'], 0)} ports in "
          f"{common.fmt(i['perf_cycle_s'], 2)} s = {common.fmt(i['perf_ports'] / max(i['perf_cycle_s'], 1e-9), 0)} ports/s |")
    print(f"| perfquery, one process per port | {pq['ports']}/{pq['asked']} ports in {pq['s']:.1f} s = "
          f"{pq['rate']:.1f} ports/s |")
    print(f"| ibsm cycle rate / perfquery rate | "
          f"{common.fmt(i['perf_ports'] / max(i['perf_cycle_s'], 1e-9) / max(pq['rate'], 1e-9), 0)}x |")
    print(f"| /metrics response (20 GETs) | median {m['median_ms']:.1f} ms, max {m['max_ms']:.1f} ms |")
    print(f"| /metrics size | {m['bytes'] / 1024:.0f} KiB, {m['series']} series ({m['port_series']} per-port) |")
    if args.inproc:
        inproc_rows(args, work)
    shutil.rmtree(work, ignore_errors=True)


def inproc_rows(args, work):
    for series in args.port_series.split(","):
        p = inproc_metrics(args.inproc, args.ibsm, args.perf_interval, work, series)
        what = f"in-process {args.inproc}, port_series = {series}"
        print(f"| {what}: /metrics response | median {p['median_ms']:.1f} ms, max {p['max_ms']:.1f} ms |")
        print(f"| {what}: /metrics size | {p['bytes'] / 1024:.0f} KiB, {p['series']} series "
              f"({p['port_series']} per-port, {common.fmt(p['perf_ports'], 0)} ports polled), SM RSS {p['rss']:.0f} MiB |")
        print(f"| {what}: /dump/port-counters | {p['dump_bytes'] / 1024:.0f} KiB, {p['dump_lines']} ports, "
              f"{p['dump_ms']:.0f} ms |")


if __name__ == "__main__":
    main()
