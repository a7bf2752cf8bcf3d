#!/usr/bin/env python3
"""roce-trace.py: what a RoCE v2 capture says about a queue pair that failed.

    roce-trace.py CAPTURE.pcap [CONTEXT]

Reads a tcpdump capture of RoCE v2 headers (UDP port 4791; -s 96 is
enough) and, for every NAK other than a PSN sequence error (invalid
request, remote access or operation error), prints the request that the
NAK names and the CONTEXT (default 40) packets of that flow before it,
both directions: opcode, PSN, payload bytes, the RETH's length, and
whether the packet repeats an earlier PSN (a retransmission). Also
prints, per flow, how many packets were sent again. Used by
engine-stress.sh's captures (issue 39); reads no other format.
"""
import struct
import sys

OPCODES = {
    0x00: "SEND_FIRST", 0x01: "SEND_MIDDLE", 0x02: "SEND_LAST",
    0x03: "SEND_LAST_IMM", 0x04: "SEND_ONLY", 0x05: "SEND_ONLY_IMM",
    0x06: "WRITE_FIRST", 0x07: "WRITE_MIDDLE", 0x08: "WRITE_LAST",
    0x09: "WRITE_LAST_IMM", 0x0a: "WRITE_ONLY", 0x0b: "WRITE_ONLY_IMM",
    0x0c: "READ_REQ", 0x11: "ACK",
}
RETH = {0x06, 0x0a, 0x0b, 0x0c}
IMM = {0x03, 0x05, 0x09, 0x0b}
NAK_NAMES = {0x60: "PSN sequence error", 0x61: "invalid request",
             0x62: "remote access error", 0x63: "remote operation error"}


def packets(path):
    with open(path, "rb") as f:
        head = f.read(24)
        magic = struct.unpack("<I", head[:4])[0]
        endian = "<" if magic in (0xa1b2c3d4, 0xa1b23c4d) else ">"
        nano = magic in (0xa1b23c4d, 0x4d3cb2a1)
        linktype = struct.unpack(endian + "I", head[20:24])[0]
        n = 0
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            sec, frac, caplen, origlen = struct.unpack(endian + "IIII", rec)
            data = f.read(caplen)
            n += 1
            t = sec + frac / (1e9 if nano else 1e6)
            off = 14 if linktype == 1 else 16 if linktype == 113 else None
            if off is None:
                sys.exit("roce-trace: link type %d is not Ethernet" % linktype)
            if linktype == 1 and data[12:14] != b"\x08\x00":
                continue
            if linktype == 113 and data[14:16] != b"\x08\x00":
                continue
            if len(data) < off + 20:
                continue            # cut short before the IP header's end
            ihl = (data[off] & 0x0f) * 4
            src = ".".join(str(b) for b in data[off + 12:off + 16])
            dst = ".".join(str(b) for b in data[off + 16:off + 20])
            iplen = struct.unpack(">H", data[off + 2:off + 4])[0]
            udp = off + ihl
            bth = udp + 8
            if len(data) < bth + 12:
                continue
            op = data[bth]
            pad = (data[bth + 1] >> 4) & 3
            qpn = struct.unpack(">I", b"\0" + data[bth + 5:bth + 8])[0]
            psn = struct.unpack(">I", b"\0" + data[bth + 9:bth + 12])[0]
            ackreq = data[bth + 8] >> 7
            ext = bth + 12
            reth_len = None
            syndrome = None
            if op in RETH and len(data) >= ext + 16:
                reth_len = struct.unpack(">I", data[ext + 12:ext + 16])[0]
                ext += 16
            if op == 0x11 and len(data) >= ext + 4:
                syndrome = data[ext]
                ext += 4
            if op in IMM:
                ext += 4
            # payload: the IP datagram minus IP, UDP, BTH and extensions,
            # the pad and the 4-byte ICRC
            payload = iplen - ihl - 8 - (ext - bth) - pad - 4
            yield dict(n=n, t=t, src=src, dst=dst, op=op, qpn=qpn, psn=psn,
                       ackreq=ackreq, reth=reth_len, syn=syndrome,
                       payload=payload)


def describe(p, seen):
    name = OPCODES.get(p["op"], "op 0x%02x" % p["op"])
    extra = ""
    if p["reth"] is not None:
        extra += " dma_len=%d" % p["reth"]
    if p["syn"] is not None:
        extra += " syndrome=0x%02x" % p["syn"]
        if p["syn"] >> 5 == 3:
            extra += " (NAK: %s)" % NAK_NAMES.get(p["syn"], "?")
        elif p["syn"] >> 5 == 1:
            extra += " (RNR NAK)"
    again = " RESENT" if seen else ""
    return "#%d %.6f %s -> %s qp 0x%06x %-15s psn %d payload %d%s%s%s" % (
        p["n"], p["t"], p["src"], p["dst"], p["qpn"], name, p["psn"],
        max(p["payload"], 0), " ack-req" if p["ackreq"] else "", extra, again)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    context = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    pkts = list(packets(sys.argv[1]))
    print("%d RoCE packets" % len(pkts))
    seen = set()
    resent = {}
    flags = []
    for p in pkts:
        key = (p["src"], p["dst"], p["qpn"], p["psn"], p["op"] == 0x11)
        flags.append(key in seen and p["op"] != 0x11)
        if key in seen and p["op"] != 0x11:
            f = (p["src"], p["dst"], p["qpn"])
            resent[f] = resent.get(f, 0) + 1
        seen.add(key)
    for f, k in sorted(resent.items()):
        print("flow %s -> %s qp 0x%06x: %d packets sent again" % (f[0], f[1], f[2], k))
    naks = [i for i, p in enumerate(pkts)
            if p["syn"] is not None and p["syn"] >> 5 == 3 and p["syn"] != 0x60]
    if not naks:
        print("no NAK other than PSN sequence errors")
    for i in naks:
        nak = pkts[i]
        print("\n== %s" % describe(nak, False))
        # the request it names: same PSN, the other direction
        reqs = [j for j in range(i) if pkts[j]["src"] == nak["dst"] and
                pkts[j]["dst"] == nak["src"] and pkts[j]["psn"] == nak["psn"]
                and pkts[j]["op"] != 0x11]
        if not reqs:
            print("   (the request is not in the capture)")
            continue
        qpn = pkts[reqs[-1]]["qpn"]
        flow = [j for j in range(i + 1)
                if (pkts[j]["src"] == nak["dst"] and pkts[j]["qpn"] == qpn and pkts[j]["op"] != 0x11)
                or (pkts[j]["src"] == nak["src"] and pkts[j]["qpn"] == nak["qpn"] and pkts[j]["op"] == 0x11)]
        for j in flow[-context:]:
            print("   " + describe(pkts[j], flags[j]))


if __name__ == "__main__":
    main()
