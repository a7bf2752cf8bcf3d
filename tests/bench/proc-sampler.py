#!/usr/bin/env python3
"""proc-sampler.py OUT STATE_DIR...: CPU time and pinned memory of the
processes a migration involves on this host (QEMU, virt-rdma engines),
read from /proc; SIGUSR1 marks the start of the migration, SIGTERM ends
sampling and writes OUT as JSON.

The sampler is started before the migration, so that its own start-up
(slow on an emulated CPU) is not part of what it measures. Processes are
found without scanning /proc: QEMU by libvirt's pid files, engines by
virt-rdmad's job files (STATE_DIR/job-N.run, "pid=").

For a process already running at the start mark (the source QEMU) the CPU
time counts from the mark; for one that started later (the destination
QEMU, the engines) from the process start. Processes are read every
200 ms: the last sample of a process that exits is at most that old, which
bounds the error of its CPU time. The engines report their exact CPU time
themselves (stats JSON); the benchmark takes theirs from there. "VmPin" is
what RDMA memory registration pins (mm->pinned_vm)."""
import glob
import json
import os
import signal
import sys
import time

PERIOD = 0.2
TICK = os.sysconf("SC_CLK_TCK")


def read_proc(pid):
    with open("/proc/%d/stat" % pid) as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICK    # utime + stime
    pin = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmPin:"):
                pin = int(line.split()[1]) * 1024
                break
    return cpu, pin


def find(state_dirs):
    found = {}
    for path in glob.glob("/run/libvirt/qemu/*.pid"):
        try:
            found[int(open(path).read().strip())] = "qemu"
        except (OSError, ValueError):
            pass
    for d in state_dirs:
        for path in glob.glob(os.path.join(d, "job-*.run")):
            try:
                for line in open(path):
                    if line.startswith("pid="):
                        found[int(line[4:])] = "engine"
            except (OSError, ValueError):
                pass
    return found


def main():
    out, state_dirs = sys.argv[1], sys.argv[2:]
    procs = {}          # pid -> {kind, start, last, pin}
    events = []
    signal.signal(signal.SIGTERM, lambda *_: events.append("stop"))
    signal.signal(signal.SIGUSR1, lambda *_: events.append("start"))
    open(out + ".ready", "w").close()
    started = False
    while True:
        mark = "start" in events and not started
        stop = "stop" in events
        if mark:
            started = True
        if started:
            for pid, kind in find(state_dirs).items():
                procs.setdefault(pid, {"kind": kind, "start": None, "last": 0.0,
                                       "pin": 0, "gone": False})
        for pid, p in procs.items():
            if p["gone"]:
                continue
            try:
                cpu, pin = read_proc(pid)
            except (OSError, ValueError, IndexError):
                p["gone"] = True
                continue
            if p["start"] is None:
                p["start"] = cpu if mark else 0.0
            p["last"] = cpu
            p["pin"] = max(p["pin"], pin)
        if stop:
            break
        time.sleep(PERIOD)
    result = {"qemu_cpu_s": 0.0, "engine_cpu_s": 0.0, "qemu_pinned": 0,
              "engine_pinned": 0, "engines": 0}
    for p in procs.values():
        k = p["kind"]
        result[k + "_cpu_s"] += p["last"] - (p["start"] or 0.0)
        result[k + "_pinned"] += p["pin"]
        if k == "engine":
            result["engines"] += 1
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
