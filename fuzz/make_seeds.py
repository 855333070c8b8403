#!/usr/bin/env python3
"""Builds fuzz/seeds/<target>/ from fixtures/mads/*.hex.

attributes: each fixture's 64 data bytes (and an 80-byte Notice with a GID).
smp: each fixture wrapped in a directed-route GetResp SMP and a LID-routed
     GetResp carrying the fixture's attribute ID.
header: the first 24 bytes of those SMPs.
Run from anywhere; rewrites the seed directories.
"""
import os, struct, shutil

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
fx = os.path.join(root, "fixtures", "mads")
seeds = os.path.join(root, "fuzz", "seeds")
ATTR = {"nodedesc": 0x10, "nodeinfo": 0x11, "switchinfo": 0x12, "guidinfo": 0x14,
        "portinfo": 0x15, "pkeys": 0x16, "sl2vl": 0x17, "vlarb": 0x18, "lft": 0x19,
        "mft": 0x1B, "sminfo": 0x20, "notice": 0x02}

def smp(directed, attr, data, path=(1, 3)):
    hdr = struct.pack(">BBBB", 1, 0x81 if directed else 0x01, 1, 0x81)
    if directed:
        # D bit set (response), status 0, hop pointer = hop count.
        hdr += struct.pack(">HBB", 0x8000, len(path), len(path))
    else:
        hdr += struct.pack(">HH", 0, 0)
    hdr += struct.pack(">QHHI", 0x1234_5678_9abc_def0, attr, 0, 1)
    body = struct.pack(">Q", 0)
    body += struct.pack(">HH", 0xFFFF, 0xFFFF) if directed else b"\0" * 4
    body += b"\0" * 28
    ipath = bytes([0, *path]).ljust(64, b"\0") if directed else b"\0" * 64
    rpath = bytes([0, *reversed(path)]).ljust(64, b"\0") if directed else b"\0" * 64
    m = hdr + body + data + ipath + rpath
    assert len(m) == 256
    return m

for t in ("attributes", "smp", "header"):
    d = os.path.join(seeds, t)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)

for name in sorted(os.listdir(fx)):
    if not name.endswith(".hex"):
        continue
    stem = name[:-4]
    data = bytes.fromhex("".join(l.strip() for l in open(os.path.join(fx, name)) if not l.startswith("#")))
    attr = ATTR[stem.removeprefix("ibsim_").split("_")[0]]
    open(os.path.join(seeds, "attributes", stem), "wb").write(data)
    for directed in (True, False):
        m = smp(directed, attr, data)
        tag = ("dr_" if directed else "lid_") + stem
        open(os.path.join(seeds, "smp", tag), "wb").write(m)
        open(os.path.join(seeds, "header", tag), "wb").write(m[:24])
    if stem.startswith("notice_"):
        gid = bytes.fromhex("fe800000000000000002c90300000001")
        open(os.path.join(seeds, "attributes", stem + "_with_gid"), "wb").write(data + gid)
