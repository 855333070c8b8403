"""Pieces every ibsim benchmark shares: the processes it started (killed on
exit), the fabric files for a topology spec, and table formatting."""
import atexit
import os
import re
import signal
import subprocess
import sys
import time

PROCS = []  # every process a benchmark started, killed on exit


def cleanup():
    for p in PROCS:
        if p.poll() is None:
            try:
                p.kill()
                p.wait(timeout=5)
            except Exception:
                pass


def kill_started_processes_on_exit():
    """Registers `cleanup` at exit and on SIGINT/SIGTERM/SIGHUP."""
    atexit.register(cleanup)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, f: sys.exit(128 + s))


def fabric_files(spec, ibsm, work):
    """The ibsim net file and flags for `spec`, its host names and link count."""
    net = os.path.join(work, "fabric.net")
    subprocess.run([ibsm, "topology", "write", spec, "--out", net], check=True)
    flags = subprocess.run([ibsm, "topology", "ibsim-args", spec], capture_output=True, text=True,
                           check=True).stdout.split()
    text = open(net).read()
    hosts = re.findall(r'^Ca\s+\d+\s+"([^"]+)"', text, re.M)
    links = int(re.search(r"(\d+) links", text).group(1))
    return net, flags, hosts, links


def fmt(x, digits=1):
    return "—" if x is None else f"{x:.{digits}f}"


def ratio(a, b):
    return "—" if a is None or not b else f"{a / b:.2f}"


def wait_log(path, needle, limit=300):
    """Waits until the file at `path` holds `needle`; False after `limit` s."""
    deadline = time.time() + limit
    while time.time() < deadline:
        if os.path.exists(path) and needle in open(path, errors="replace").read():
            return True
        time.sleep(0.2)
    return False
