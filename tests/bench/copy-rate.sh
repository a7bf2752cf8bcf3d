#!/bin/bash
# copy-rate.sh MIB RUNS: the CPU yardstick of the benchmark. Bytes per
# second that one process writes through a pipe and another reads, 64 KiB
# at a time (two copies and two system calls per block, as through QEMU's
# socket), median of RUNS runs of MIB MiB. The same on a sandbox host and
# on the machine scales CPU time measured under emulation to real cores.
set -u -o pipefail
mib=$1 runs=$2
for _ in $(seq "$runs"); do
    dd if=/dev/zero bs=64K count=$((mib * 16)) status=none |
        LC_ALL=C dd of=/dev/null bs=64K 2>&1 | awk '/copied/ {printf "%.0f\n", $1 / $(NF-3)}'
done | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'
