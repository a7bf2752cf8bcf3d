#!/usr/bin/env python3
"""roce-trace-test.py: roce-trace.py on a capture made here.

A made-up RoCE v2 capture with the shape of issue 39's failure: a
retransmitted empty WRITE_ONLY_WITH_IMMEDIATE under the next message's
PSN, the responder's "NAK invalid request" for it, and two packets cut
short (which must be skipped, not crash the reader). The analysis must
name the NAK, the request it names, and the packet sent again.
"""
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def roce(src, dst, op, qpn, psn, payload=0, reth_len=None, syndrome=None,
         imm=False):
    bth = struct.pack(">BBHI", op, 0, 0xffff, qpn) + struct.pack(">I", (1 << 31) | psn)
    ext = b""
    if reth_len is not None:
        ext += struct.pack(">QII", 0x1000, 0x42, reth_len)
    if syndrome is not None:
        ext += struct.pack(">I", syndrome << 24 | 7)
    if imm:
        ext += struct.pack(">I", 5)
    body = bth + ext + b"\xab" * payload + b"\0\0\0\0"      # ICRC
    udp = struct.pack(">HHHH", 49152, 4791, 8 + len(body), 0) + body
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0,
                     bytes(src), bytes(dst)) + udp
    return b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00" + ip


def main():
    a, b = [10, 0, 0, 1], [10, 0, 0, 2]
    frames = [
        roce(a, b, 0x06, 0x11, 100, payload=1024, reth_len=2048),      # WRITE_FIRST
        roce(a, b, 0x09, 0x11, 101, payload=1024, imm=True),           # WRITE_LAST_IMM
        roce(a, b, 0x0b, 0x11, 102, payload=0, reth_len=0, imm=True),  # the empty one
        roce(a, b, 0x0b, 0x11, 102, payload=0, reth_len=0, imm=True),  # sent again
        b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00" + b"\x45",             # cut short
        roce(b, a, 0x11, 0x22, 102, syndrome=0x61),                    # NAK invalid request
        roce(b, a, 0x11, 0x22, 103)[:50],                              # cut short
    ]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.pcap")
        with open(path, "wb") as f:
            f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
            for i, fr in enumerate(frames):
                f.write(struct.pack("<IIII", 1000 + i, 0, len(fr), len(fr)) + fr)
        out = subprocess.run([sys.executable, os.path.join(HERE, "roce-trace.py"), path],
                             capture_output=True, text=True, timeout=60)
    print(out.stdout, out.stderr, sep="")
    want = [
        "flow 10.0.0.1 -> 10.0.0.2 qp 0x000011: 1 packets sent again",
        "ACK             psn 102 payload 0 ack-req syndrome=0x61 (NAK: invalid request)",
        "WRITE_ONLY_IMM  psn 102 payload 0 ack-req dma_len=0 RESENT",
        "WRITE_FIRST     psn 100 payload 1024 ack-req dma_len=2048",
    ]
    missing = [w for w in want if w not in out.stdout]
    if out.returncode != 0 or missing:
        print("FAIL: roce-trace.py exited %d; missing: %s" % (out.returncode, missing))
        return 1
    print("ok: the NAK, its request and the packet sent again are named")
    return 0


if __name__ == "__main__":
    sys.exit(main())
