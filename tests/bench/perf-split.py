#!/usr/bin/env python3
"""perf-split.py < `perf script -F comm,ip,sym,dso` output: how the
engine's CPU samples divide between rxe's packet work and the engine's own.

On Soft-RoCE the kernel does a NIC's work (packet copies, ICRC, the IP
path to virtio) in the context of whoever posts or polls, so the engine's
CPU time includes it; on RDMA hardware that work is the NIC's. A sample of
an engine thread (virt-rdma-engine's main thread or a channel's vrm-chN)
counts as rxe's when any frame of its call chain is in the rdma_rxe module
or an rxe_ function; every other engine sample is the engine's own (its
code, its socket system calls, libibverbs). Prints one JSON object:
{"samples": all samples, "engine": engine samples, "rxe": those of them in
rxe, "own": the rest, "top": [[symbol, "rxe" or "own", samples], ...] the
engine's busiest symbols (where its samples were taken)}."""
import collections
import json
import sys

ENGINE_COMMS = ("virt-rdma-engin", "virt-rdma-engine")


def is_engine(comm):
    return comm in ENGINE_COMMS or comm.startswith("vrm-ch")


def in_rxe(frame):
    # "ffffffffc0a1b2c3 rxe_requester+0x1a2 ([rdma_rxe])"
    return "[rdma_rxe]" in frame or " rxe_" in frame


def main():
    counts = {"samples": 0, "engine": 0, "rxe": 0, "own": 0}
    leaves = collections.Counter()
    comm, frames = None, []

    def flush():
        if comm is None:
            return
        counts["samples"] += 1
        if is_engine(comm):
            kind = "rxe" if any(in_rxe(f) for f in frames) else "own"
            counts["engine"] += 1
            counts[kind] += 1
            # " ffffffffab3f6a07 clear_page_erms ([kernel.kallsyms])"
            leaf = frames[0].split()[1] if frames and len(frames[0].split()) > 1 else "?"
            leaves[(leaf, kind)] += 1

    for line in sys.stdin:
        line = line.rstrip("\n")
        if not line.strip():
            flush()
            comm, frames = None, []
        elif line[0] in " \t":
            frames.append(" " + line.strip())
        else:
            flush()
            # a sample's first line: the command, then (without a call
            # chain) its one frame on the same line
            parts = line.split(None, 1)
            comm, frames = parts[0], [" " + parts[1]] if len(parts) > 1 else []
    flush()
    counts["top"] = [[sym, kind, n] for (sym, kind), n in leaves.most_common(8)]
    json.dump(counts, sys.stdout)
    print()


if __name__ == "__main__":
    main()
