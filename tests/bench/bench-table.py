#!/usr/bin/env python3
"""bench-table.py RESULTS MEM_MIB DIRTY_CMDLINE: the migration benchmark's
table, from the files migrate-bench.sh left in RESULTS:

  engine.txt        ib_write_bw and the engine alone (engine-bench.sh)
  N-a.json          run N on the source: method, load, exit status, output,
                    libvirt's completed-job statistics (--rawstats), the
                    source engine's final stats
  N-b.json          run N on the destination: memory check, engine stats
  N-{a,b}-proc.json QEMU CPU seconds and peak pinned bytes (proc-sampler.py)

Every cell is the median over the repetitions that succeeded, with the
spread (min-max) in brackets."""
import json
import os
import re
import statistics
import sys

METHODS = [("vrm1", "virt-rdma, 1 channel"),
           ("vrm1x", "virt-rdma, variant"),
           ("vrm4", "virt-rdma, 4 multifd"),
           ("vrm1t", "transparent, 1 channel"),
           ("vrm4t", "transparent, 4 multifd"),
           ("native", "QEMU native rdma:"),
           ("tcp", "libvirt TCP (info)")]
LOADS = [("idle", "idle"), ("dirty", "dirtying")]


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def jobstats(text):
    """libvirt's typed job parameters, as virsh --rawstats prints them"""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^\s*([a-z_.]+)\s*[:=]\s*(-?[\d.]+)\s*$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def engine_cpu(blob):
    cpu, sent = 0.0, 0
    for line in (blob or "").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            s = json.loads(line)
        except ValueError:
            continue
        cpu += s.get("cpu-user-s", 0) + s.get("cpu-system-s", 0)
        sent = max(sent, s["bytes-sent"])
    return cpu, sent


def last_error(output):
    lines = [l.strip() for l in output.replace("\r", "\n").splitlines() if l.strip()]
    err = [l for l in lines if "error" in l.lower()]
    return (err or lines or ["(no output)"])[-1][:150]


def cell(values, fmt):
    if not values:
        return "-"
    med = statistics.median(values)
    if len(values) == 1:
        return fmt % med
    return (fmt + " [" + fmt + "-" + fmt + "]") % (med, min(values), max(values))


def main():
    res, mem, dirty = sys.argv[1], sys.argv[2], sys.argv[3]
    eng, cells = {}, {}
    for line in open(os.path.join(res, "engine.txt")):
        k, v = line.split()
        if k.endswith("_cell"):
            cells[k[:-5]] = v.replace("[", " [")
        else:
            eng[k] = float(v)
    ib = eng["ib_write_bw_mbit"]

    runs = {}
    n = 1
    while os.path.exists(os.path.join(res, "%d-a.json" % n)):
        a = load_json(os.path.join(res, "%d-a.json" % n))
        b = load_json(os.path.join(res, "%d-b.json" % n)) or {}
        pa = load_json(os.path.join(res, "%d-a-proc.json" % n)) or {}
        pb = load_json(os.path.join(res, "%d-b-proc.json" % n)) or {}
        r = runs.setdefault((a["load"], a["method"]), {"ok": [], "failed": []})
        r["mem"] = int(a.get("mem", mem))
        if a["rc"] != "0" or b.get("verified") != "yes":
            r["failed"].append(last_error(a["output"]) if a["rc"] != "0"
                               else "the guest did not verify on the destination")
        else:
            js = jobstats(a["jobstats"])
            cpu_a, sent = engine_cpu(a.get("engine_json"))
            cpu_b, _ = engine_cpu(b.get("engine_json"))
            mem_bytes = js.get("memory_processed", 0)
            r["ok"].append({
                "run": n,
                "total": js.get("time_elapsed", 0) / 1000,
                "wall": float(a["wall_s"]),
                "downtime": js.get("downtime", 0),
                "setup": js.get("setup_time", 0),
                "mibs": js.get("memory_bps", 0) / 2**20,
                "mbit": js.get("memory_bps", 0) * 8 / 1e6,
                "qemu_cpu": pa.get("qemu_cpu_s", 0) + pb.get("qemu_cpu_s", 0),
                "engine_cpu": cpu_a + cpu_b,
                "engine_cpu_gib": (cpu_a + cpu_b) / (sent / 2**30) if sent else None,
                "pinned": max(pa.get("qemu_pinned", 0) + pa.get("engine_pinned", 0),
                              pb.get("qemu_pinned", 0) + pb.get("engine_pinned", 0)) / 2**20,
                "memory": mem_bytes / 2**20,
                "passes": js.get("memory_iteration", 0),
            })
        n += 1

    w = 132
    print()
    print("=" * w)
    print("virt-rdma performance, one sandbox run: two Soft-RoCE hosts (rxe, QEMU TCG), "
          "guest of %s MiB" % mem)
    if os.environ.get("VRM_BENCH_STACK"):
        print("hosts: %s" % os.environ["VRM_BENCH_STACK"])
    print("=" * w)
    print("Link and engine alone (128 MiB stream, 1 MiB chunks, every byte checked; "
          "median [min-max]):")
    print("  %-28s %24s %8s %18s" % ("", "Mbit/s", "/ib_wb", "engine CPU s/GiB"))
    print("  %-28s %24s %8s %18s" % ("ib_write_bw", cells.get("ib_write_bw", "%.1f" % ib),
                                     "1.00", "-"))
    for c in (1, 2, 4):
        k = "engine_%dch" % c
        if k + "_mbit" in eng:
            print("  %-28s %24s %8.2f %18.2f" % (
                "engine, %d channel%s" % (c, "s" if c > 1 else ""),
                cells.get(k, "%.1f" % eng[k + "_mbit"]), eng[k + "_mbit"] / ib,
                eng[k + "_cpu_s_per_gib"]))
    print()
    print("Live migration through libvirt (median [min-max] over the successful runs; "
          "ratios of medians):")
    hdr = ("%-9s %-21s %4s %-18s %-18s %-18s %-16s %-18s %6s %-18s %-12s %7s %8s" %
           ("guest", "method", "ok", "total s", "wall s", "downtime ms", "setup ms", "memory MiB/s",
            "/ib_wb", "vs native t/dt/bw", "QEMU CPU s", "eng CPU", "pin MiB"))
    print(hdr)
    print("-" * len(hdr))
    summary = {}
    for load, load_name in LOADS:
        nat = runs.get((load, "native"), {"ok": []})["ok"]
        nat_med = ({k: statistics.median([x[k] for x in nat]) for k in ("total", "downtime", "mibs")}
                   if nat else None)
        for method, label in METHODS:
            r = runs.get((load, method))
            if not r:
                continue
            ok = r["ok"]
            tries = len(ok) + len(r["failed"])
            col = lambda k, f: cell([x[k] for x in ok if x[k] is not None], f)
            if ok:
                med = {k: statistics.median([x[k] for x in ok]) for k in ("total", "downtime", "mibs", "mbit")}
                ratio_ib = "%.2f" % (med["mbit"] / ib)
                if nat_med and method != "native":
                    vs = "%.2f/%.2f/%.2f" % (med["total"] / nat_med["total"],
                                             med["downtime"] / max(nat_med["downtime"], 1),
                                             med["mibs"] / nat_med["mibs"])
                elif method == "native":
                    vs = "1.00/1.00/1.00"
                else:
                    vs = "n/a (native failed)"
                summary[(load, method)] = med
                print("%-9s %-21s %4s %-18s %-18s %-18s %-16s %-18s %6s %-18s %-12s %7s %8s" % (
                    load_name, label, "%d/%d" % (len(ok), tries), col("total", "%.1f"),
                    col("wall", "%.1f"),
                    col("downtime", "%.0f"), col("setup", "%.0f"), col("mibs", "%.1f"),
                    ratio_ib, vs, col("qemu_cpu", "%.1f"),
                    "%.2f" % statistics.median([x["engine_cpu"] for x in ok]) if method.startswith("vrm") else "-",
                    "%.0f" % statistics.median([x["pinned"] for x in ok])))
            else:
                print("%-9s %-21s %4s %s" % (load_name, label, "0/%d" % tries,
                                             "FAILED: " + r["failed"][-1]))
            for err in sorted(set(r["failed"])):
                if ok:
                    print("%-9s %-21s %4s failed %d time(s): %s" % (
                        "", "", "", r["failed"].count(err), err))
    print("-" * len(hdr))
    print("total/downtime/setup/memory: libvirt's completed-job statistics on the source; "
          "wall: the migrate command, start to exit (virt-rdma's")
    print("RDMA set-up before libvirt's job starts is in it); /ib_wb = memory bandwidth "
          "in Mbit/s over ib_write_bw; vs native: total, downtime, memory bandwidth;")
    print("QEMU CPU: source QEMU during the migration + destination QEMU from its start; "
          "eng CPU: both engines' own user+system seconds;")
    moved = []
    for load, load_name in LOADS:
        mem = [x["memory"] for (l, m), r in runs.items() if l == load for x in r["ok"]]
        passes = [x["passes"] for (l, m), r in runs.items() if l == load for x in r["ok"]]
        if mem:
            moved.append("%s %s MiB in %s passes" % (load_name, cell(mem, "%.1f"),
                                                     cell(passes, "%.0f")))
    print("pin MiB: peak pinned memory (VmPin) of QEMU + engines on the busier host. "
          "Dirtying guest: %s." % dirty)
    if any(m == "vrm1x" for (l, m) in runs):
        print("variant: virt-rdma, 1 channel, with %s." % os.environ.get("VRM_BENCH_VARIANT", "?"))
    if moved:
        print("Memory moved (libvirt's memory processed, all methods): %s." % "; ".join(moved))
    print()
    print("Targets:")
    e1 = eng.get("engine_1ch_mbit", 0) / ib
    print("  engine/ib_write_bw, 1 channel          %.2f  (target >= 0.90: %s)" % (
        e1, "met" if e1 >= 0.9 else "NOT met"))
    for method in ("vrm1", "vrm4"):
        m = summary.get(("idle", method))
        if m:
            print("  %-38s %.2f  (target >= 0.80: %s)" % (
                "idle guest, %s memory bw/ib_wb" % method, m["mbit"] / ib,
                "met" if m["mbit"] / ib >= 0.8 else "NOT met"))
    for load, load_name in LOADS:
        nat = summary.get((load, "native"))
        for method in ("vrm1", "vrm4", "vrm1t", "vrm4t"):
            m = summary.get((load, method))
            if not m:
                continue
            if not nat:
                why = ("QEMU native failed in every run" if runs.get((load, "native"))
                       else "no QEMU native run")
                print("  %s guest, %s vs native: %s, no comparison" % (load_name, method, why))
                continue
            print("  %-38s %s  (total %.1f s vs %.1f s, downtime %.0f ms vs %.0f ms)" % (
                "%s guest, %s <= native" % (load_name, method),
                "met" if m["total"] <= nat["total"] and m["downtime"] <= nat["downtime"] else "NOT met",
                m["total"], nat["total"], m["downtime"], nat["downtime"]))
    for load, load_name in LOADS:
        # the transparent mode (plain virsh, libvirt's TCP URI steered
        # into the engine) against the per-domain path, same run
        for path, steered in (("vrm1", "vrm1t"), ("vrm4", "vrm4t")):
            p, t = summary.get((load, path)), summary.get((load, steered))
            if p and t:
                print("  %-38s %.2f  (target <= 1.05: %s; total %.1f s vs %.1f s)" % (
                    "%s guest, %s/%s total" % (load_name, steered, path), t["total"] / p["total"],
                    "met" if t["total"] <= 1.05 * p["total"] else "NOT met",
                    t["total"], p["total"]))
    for load, load_name in LOADS:
        tcp = runs.get((load, "tcp"), {"ok": []})["ok"]
        if not tcp:
            continue
        tcp_cpu = statistics.median([x["qemu_cpu"] for x in tcp])
        for method in ("vrm1", "vrm4", "vrm1t", "vrm4t"):
            ok = runs.get((load, method), {"ok": []})["ok"]
            if not ok:
                continue
            cpu = statistics.median([x["qemu_cpu"] + x["engine_cpu"] for x in ok])
            print("  %-38s %s  (QEMU + engines %.1f s vs TCP's QEMU %.1f s, both hosts)" % (
                "%s guest, %s CPU <= TCP" % (load_name, method),
                "met" if cpu <= tcp_cpu else "NOT met", cpu, tcp_cpu))
    for load, load_name in LOADS:
        for method in ("vrm1", "vrm1x", "vrm4", "vrm1t", "vrm4t"):
            vals = [x["engine_cpu_gib"] for x in runs.get((load, method), {"ok": []})["ok"]
                    if x["engine_cpu_gib"]]
            if vals:
                print("  engine CPU s/GiB, %s guest, %s       %.2f (both hosts)" % (
                    load_name, method, statistics.median(vals)))
    engine_split(res, runs)
    scaling(runs)


def engine_split(res, runs):
    """VRM_BENCH_PROFILE=1: the engines' profiled samples split between
    rxe's packet work (a NIC's, on hardware) and the engine's own"""
    profiled = []           # (load, label, run, both hosts' splits, own s/GiB)
    for (load, method), r in sorted(runs.items()):
        if not method.startswith("vrm"):
            continue
        for x in r["ok"]:
            split = [load_json(os.path.join(res, "perf-%d-%s-%s-split.json" % (x["run"], method, h)))
                     for h in "ab"]
            if not all(split) or not x["engine_cpu_gib"]:
                continue
            eng = sum(s["engine"] for s in split)
            if eng:
                own = sum(s["own"] for s in split)
                profiled.append((load, dict(METHODS)[method], x["run"], split, eng, own,
                                 x["engine_cpu_gib"]))
    if not profiled:
        return
    print()
    print("Engine CPU without rxe (perf profiles, both hosts; profiled runs are slower, "
          "so only the shares count):")
    print("  %-9s %-21s %-7s %6s %7s %7s %10s %10s" % (
        "guest", "method", "", "samples", "rxe", "own", "s/GiB", "own s/GiB"))
    for load, label, run, _, eng, own, gib in profiled:
        print("  %-9s %-21s run %-3d %6d %6.1f%% %6.1f%% %10.2f %10.2f" % (
            load, label, run, eng, 100.0 * (eng - own) / eng, 100.0 * own / eng,
            gib, gib * own / eng))
    for _, _, run, split, _, _, _ in profiled:
        for sp, role in zip(split, ("source", "destination")):
            if sp.get("top") and sp["engine"]:
                print("    run %d, %s engine, busiest: %s" % (run, role, ", ".join(
                    "%s (%s) %.0f%%" % (sym, kind, 100.0 * n / sp["engine"])
                    for sym, kind, n in sp["top"][:6])))
    print("  rxe: samples with an rdma_rxe frame in their call chain (packet copies, ICRC, "
          "the IP path: a NIC's work on hardware); own: the rest.")
    try:
        sandbox = float(open(os.path.join(res, "copy-rate-sandbox.txt")).read())
        machine = float(os.environ.get("VRM_BENCH_MACHINE_COPY_RATE", ""))
    except (OSError, ValueError):
        return
    if sandbox > 0 and machine > 0:
        print("  CPU yardstick, bytes copied through a pipe: %.0f MB/s in a sandbox host, "
              "%.0f MB/s on this machine's cores (x%.0f):" % (sandbox / 1e6, machine / 1e6,
                                                            machine / sandbox))
        print("  the engine's own s/GiB above divided by %.0f estimates its cost on real "
              "cores beside an RDMA NIC." % (machine / sandbox))
        for load, label, run, _, eng, own, gib in profiled:
            own_gib = gib * own / eng
            print("    %s, %s, run %d: about %.3f s per GiB (both hosts), %.1f GiB/s per core" % (
                load, label, run, own_gib * sandbox / machine,
                machine / (own_gib * sandbox) if own_gib else 0))


def slope(points):
    """least-squares seconds per MiB through (MiB, s) points"""
    if len(points) < 2:
        return None
    mx = statistics.mean(p[0] for p in points)
    my = statistics.mean(p[1] for p in points)
    den = sum((p[0] - mx) ** 2 for p in points)
    return sum((p[0] - mx) * (p[1] - my) for p in points) / den if den else None


def scaling(runs):
    """the idle guest at several sizes (loads scale-SIZE): virt-rdma, one
    channel, against QEMU's native RDMA"""
    sizes = sorted({r["mem"] for (l, m), r in runs.items() if l.startswith("scale-")})
    if not sizes:
        return
    print()
    print("Scaling: the idle guest at %s MiB (median [min-max] over the successful runs):" %
          ", ".join(str(x) for x in sizes))
    hdr = "%-8s %-21s %5s %-18s %-18s %-14s %-14s" % (
        "guest", "method", "ok", "total s", "downtime ms", "moved MiB", "pin MiB")
    print(hdr)
    print("-" * len(hdr))
    growth = {}
    for method, label in METHODS:
        for size in sizes:
            r = runs.get(("scale-%d" % size, method))
            if not r:
                continue
            ok = r["ok"]
            tries = len(ok) + len(r["failed"])
            col = lambda k, f: cell([x[k] for x in ok], f)
            if ok:
                print("%-8s %-21s %5s %-18s %-18s %-14s %-14s" % (
                    "%d MiB" % size, label, "%d/%d" % (len(ok), tries), col("total", "%.1f"),
                    col("downtime", "%.0f"), col("memory", "%.0f"), col("pinned", "%.0f")))
                growth.setdefault(method, []).append(
                    (size, statistics.median([x["total"] for x in ok]),
                     statistics.median([x["pinned"] for x in ok])))
            else:
                print("%-8s %-21s %5s FAILED: %s" % ("%d MiB" % size, label, "0/%d" % tries,
                                                     r["failed"][-1]))
    print("-" * len(hdr))
    print("pin MiB: peak pinned memory (VmPin) of QEMU + engines on the busier host.")
    for method, label in METHODS:
        g = growth.get(method)
        if not g or len(g) < 2:
            continue
        (s0, t0, p0), (s1, t1, p1) = g[0], g[-1]
        sl = slope([(x[0], x[1]) for x in g])
        print("  %-21s total %.1f s at %d MiB -> %.1f s at %d MiB (x%.2f for x%.0f the RAM, "
              "%.3f s per MiB); pinned %.0f -> %.0f MiB%s" % (
                  label, t0, s0, t1, s1, t1 / t0 if t0 else 0, s1 / s0,
                  sl if sl is not None else 0, p0, p1,
                  " (flat)" if abs(p1 - p0) <= 1 else ""))


if __name__ == "__main__":
    main()
