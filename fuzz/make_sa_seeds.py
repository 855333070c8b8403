#!/usr/bin/env python3
"""Builds fuzz/seeds/sa_agent/ and fuzz/seeds/rmpp/: inputs in the two
targets' own formats (see the docs at the top of fuzz_targets/sa_agent.rs
and rmpp.rs) that reach deep states at once: a multi-MAD answer ACKed to
the end, a subscription with a trap, its Report and ReportResp, a
ServiceRecord Set, PathRecord queries with the fabric's GIDs, a long
GetMulti, a flood, serving changes and snapshot swaps; for RMPP a clean
transfer, a lossy one, and forged segments and ACKs.
Run from anywhere; rewrites the two seed directories.
"""
import os, shutil, struct

root = os.path.dirname(os.path.abspath(__file__))
seeds = os.path.join(root, "seeds")

# Indices into the target's tables.
M = {"Get": 0, "Set": 1, "GetTable": 2, "Delete": 3, "GetMulti": 4, "ReportResp": 7}
A = {"ClassPortInfo": 0, "Notice": 1, "InformInfo": 2, "NodeRecord": 3, "PortInfoRecord": 4,
     "GuidInfoRecord": 12, "ServiceRecord": 13, "PathRecord": 15, "MultiPathRecord": 19,
     "InformInfoRecord": 20, "LinkRecord": 11, "SmInfoRecord": 10}


def chunk(op, b1=0, b2=0, fields=()):
    c = bytearray(256)
    c[0], c[1], c[2] = op, b1, b2
    for off, data in fields:
        c[off:off + len(data)] = data
    return bytes(c)


def request(method, attr, who=1, tid=0, key=0, mask=None, plant=0, data=b"", flags=0):
    """A forced request (opcode 1); `mask` raw when given, else 0."""
    sel = key | (4 if mask is not None else 0) | plant << 4
    fields = [(3, bytes([M[method]])), (8, bytes([tid])), (16, bytes([A[attr]])), (56, data)]
    if mask is not None:
        fields.append((48, struct.pack(">Q", mask)))
    return chunk(1 | flags, who, sel, fields)


def ack(segment, window, who=1, tid=0, kind=0, attr="NodeRecord"):
    """An RMPP ACK (kind 0), STOP (4) or ABORT (5) from a requester."""
    return chunk(4, who, 0, [(3, b"\0"), (8, bytes([tid])), (16, bytes([A[attr]])),
                             (25, bytes([kind])), (31, bytes([segment])), (35, bytes([window - segment]))])


def wait(ms):
    return chunk(6, ms >> 8, ms & 0xFF)


def admin(what, arg=0):
    return chunk(7, what, arg)


def trap(index=0, issuer=1, who=1):
    notice = bytearray(80)
    notice[4], notice[6] = index, issuer
    return chunk(5 | 8, who, 0, [(56, bytes(notice))])


# InformInfo for every generic trap of every LID (IBA 13.4.8.3).
subscribe_all = (bytes(16) + struct.pack(">HHH", 0xFFFF, 0, 0) + bytes([1, 1])
                 + struct.pack(">HH", 0xFFFF, 0xFFFF) + bytes(5) + b"\xff\xff\xff")
table = [request("GetTable", "NodeRecord"), ack(1, 64), wait(1), ack(13, 77)]
sa = {
    "table_acked": bytes([0]) + b"".join(table),
    "table_lost": bytes([0]) + b"".join([request("GetTable", "NodeRecord"), wait(300), wait(300), ack(1, 2),
                                         request("GetTable", "NodeRecord"), admin(0), ack(2, 3, kind=4)]),
    "subscribe_trap_report": bytes([0]) + b"".join([
        request("Set", "InformInfo", who=2, data=subscribe_all), trap(0, issuer=3), trap(4, issuer=3),
        request("ReportResp", "Notice", who=2, tid=4), wait(1500), admin(0),
        request("GetTable", "InformInfoRecord", who=2, key=1)]),
    "snapshot_swap": bytes([0]) + b"".join([
        request("Set", "InformInfo", who=2, data=subscribe_all), admin(5), admin(4), admin(6, 0),
        request("Get", "NodeRecord", plant=1), admin(6, 2), request("Get", "SmInfoRecord")]),
    "service_set": bytes([0]) + b"".join([
        request("Set", "ServiceRecord", who=3, mask=0xFFFF, plant=2, data=b"\x10" * 8 + bytes(16) + b"\xff\xff\0\0\0\0\0\x05"),
        request("GetTable", "ServiceRecord", who=4), request("Delete", "ServiceRecord", who=3, mask=0x1),
        wait(6000)]),
    "paths": bytes([0]) + b"".join([
        request("Get", "PathRecord", mask=0x0C, plant=2), request("GetTable", "PathRecord", mask=0x0C, plant=2),
        request("GetTable", "PathRecord"), request("Get", "PortInfoRecord", mask=1, plant=1, key=1),
        request("GetTable", "LinkRecord"), request("Get", "ClassPortInfo")]),
    "multipath_long": bytes([0]) + request("GetMulti", "MultiPathRecord", plant=3, flags=0x20,
                                           data=bytes(15) + b"\x01\x01") + bytes(64),
    "guid_set": bytes([0]) + b"".join([
        request("Set", "GuidInfoRecord", who=5, mask=0x7, plant=1, key=1, data=bytes(8) + b"\x02" * 8),
        request("GetTable", "GuidInfoRecord", who=5)]),
    "flood": bytes([1]) + b"".join(request("GetTable", "NodeRecord", who=w, tid=t, flags=0x40)
                                   for w in range(1, 9) for t in range(3)),
}

# RMPP: class/window, payload length, timers; then operations.
def rmpp(b0, length, b3, ops):
    return bytes([b0]) + struct.pack(">H", length) + bytes([b3]) + bytes(ops)


clean = [0x00, 0x0F] + [0x01, 0x00] * 12 + [0x02, 0x00] * 4
lossy = [0x00, 0x03, 0x08, 0x02, 0x01, 0x01, 0x0F, 0x00, 0x0F, 0x01, 0x00, 0x02, 0x00, 0x0F]
forged = ([0x03, 0xAA, 0x01, 0x00, 0x01, 0x00, 0x05, 0x00, 0x00, 0x05]
          + [0x05, 0x01, 0x03, 0x07, 0x05, 0x04, 0x02, 0x06, 0x30] + [0x11] * 48
          + [0x04, 0x40] + [0x00] * 64)
rm = {
    "clean_sa": rmpp(0x10, 2048, 0x02, clean),
    "clean_devmgt": rmpp(0x11, 900, 0x12, clean),
    "clean_vendor": rmpp(0x0E, 4000, 0x01, clean),
    "lossy": rmpp(0x04, 1500, 0x05, lossy),
    "forged": rmpp(0x20, 700, 0x0A, forged),
    "empty_payload": rmpp(0x00, 0, 0x00, [0x00, 0x00, 0x01, 0x00, 0x02, 0x00]),
}

for name, files in (("sa_agent", sa), ("rmpp", rm)):
    d = os.path.join(seeds, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for f, b in files.items():
        with open(os.path.join(d, f), "wb") as out:
            out.write(b)
