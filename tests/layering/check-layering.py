#!/usr/bin/env python3
"""check-layering.py: the include rules between virt-rdma's folders, and no
cycle between files.

In the spirit of libvirt's sc_prohibit_cross_inclusion: each folder may
include the project headers of the folders below it and nothing above, and
some system headers (verbs, libvirt, GnuTLS) belong to one layer only. Then,
over the compiled objects, no two source files call each other, directly or
around a loop (a cycle of modules), and no header includes itself back.

    check-layering.py SOURCE_DIR [BUILD_DIR]

Without BUILD_DIR only the include rules and header cycles are checked.
Exits 1 and prints one line per violation. The rules are the table below;
docs/index.rst ("Layers") explains them.
"""
import os
import re
import subprocess
import sys
from collections import defaultdict

# folder -> folders whose headers it may include (besides its own).
# Order matters only for readability; a folder is matched by prefix, the
# longest prefix wins.
RULES = {
    "util": [],
    "xml": ["util"],
    "driver/protocol": ["util"],
    "driver/rdma": ["util"],
    "driver/contract": ["util"],
    "driver/transport": ["util", "driver/protocol", "driver/rdma",
                         "driver/contract"],
    "driver/engine": ["util", "driver/protocol", "driver/rdma",
                      "driver/contract", "driver/transport"],
    "driver/helper": ["util", "xml", "driver/contract"],
    "tools/hook": ["util", "xml", "driver/helper:client"],
    "tools/lib": ["util", "xml", "driver/helper:client"],
    "tools/cli": ["util", "xml", "driver/helper:client", "driver/contract",
                  "tools/lib"],
}

# "folder:name" entries above: the headers a folder exposes to layers
# above it that are not otherwise allowed to see it.
EXPORTS = {
    "driver/helper:client": {"vrmhelperclient.h", "vrmhelperconf.h"},
}

# System headers that belong to some layers only (prefix of the path in <>).
SYSTEM = {
    "infiniband/": ["driver/rdma", "driver/transport", "driver/engine"],
    "rdma/": ["driver/rdma", "driver/transport", "driver/engine"],
    "libvirt/": ["driver/helper", "tools"],
    "gnutls/": ["driver/helper"],
}

# Violations known today and being removed (issue 15). Each entry is the
# exact line this script prints without the "layering: " prefix. Keep this
# list short-lived: an entry that no longer occurs is itself an error.
KNOWN = set()

CHECKED = ["util", "xml", "driver", "tools"]
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def folder_of(path, folders):
    best = None
    for f in folders:
        if path == f or path.startswith(f + "/"):
            if best is None or len(f) > len(best):
                best = f
    return best


def sources(src):
    for top in CHECKED:
        for root, _, files in os.walk(os.path.join(src, top)):
            for name in files:
                if name.endswith((".c", ".h")):
                    full = os.path.join(root, name)
                    yield os.path.relpath(full, src)


def check_includes(src):
    problems = []
    files = sorted(sources(src))
    where = defaultdict(list)       # header name -> project paths
    for f in files:
        if f.endswith(".h"):
            where[os.path.basename(f)].append(f)
    includes = {}
    for f in files:
        layer = folder_of(f, RULES)
        if layer is None:
            problems.append("%s: folder has no layering rule; add one to %s"
                            % (f, os.path.basename(__file__)))
            continue
        allowed = RULES[layer]
        incs = []
        with open(os.path.join(src, f), encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                kind, name = m.groups()
                if kind == "<" or name == "config.h":
                    if kind == "<":
                        for prefix, owners in SYSTEM.items():
                            if name.startswith(prefix) and \
                                    not any(folder_of(f, [o]) for o in owners):
                                problems.append(
                                    "%s:%d: <%s> belongs to %s only"
                                    % (f, lineno, name, ", ".join(owners)))
                    continue
                targets = [t for t in where.get(os.path.basename(name), [])
                           if t.endswith(name)]
                if not targets:
                    continue        # generated or external header
                target = targets[0]
                incs.append(target)
                tlayer = folder_of(target, RULES)
                if tlayer == layer:
                    continue
                ok = tlayer in allowed
                for a in allowed:
                    if ":" in a and a.split(":")[0] == tlayer and \
                            os.path.basename(target) in EXPORTS[a]:
                        ok = True
                if not ok:
                    problems.append("%s:%d: includes %s: %s may not include %s"
                                    % (f, lineno, target, layer, tlayer))
        includes[f] = incs
    problems += header_cycles(includes)
    return problems


def header_cycles(includes):
    problems = []
    state = {}

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for nxt in includes.get(node, []):
            if state.get(nxt) == 1:
                cyc = stack[stack.index(nxt):] + [nxt]
                problems.append("include cycle: %s" % " -> ".join(cyc))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for h in sorted(includes):
        if h.endswith(".h") and h not in state:
            visit(h, [])
    return problems


def objects(build):
    for root, _, files in os.walk(build):
        rel = os.path.relpath(root, build) + "/"
        if rel.startswith(("tests/", "meson-private/", "compat/")):
            continue
        for name in files:
            if name.endswith(".c.o"):
                yield os.path.join(root, name)


def module_graph(objs):
    defined = {}
    undefined = defaultdict(set)
    for obj in objs:
        mod = os.path.basename(obj)[:-len(".o")]
        out = subprocess.run(["nm", "--defined-only", "-g", obj],
                             capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3:
                defined.setdefault(parts[2], mod)
        out = subprocess.run(["nm", "-u", obj], capture_output=True,
                             text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if parts:
                undefined[mod].add(parts[-1])
    graph = defaultdict(set)
    for mod, syms in undefined.items():
        for s in syms:
            if s in defined and defined[s] != mod:
                graph[mod].add(defined[s])
    return graph


def module_cycles(graph):
    """Strongly connected components with more than one module (Tarjan)."""
    index = {}
    low = {}
    stack = []
    on = set()
    out = []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(set(graph) | {w for ws in graph.values() for w in ws}):
        if v not in index:
            strong(v)
    return ["calls go around in a cycle between %s" % " <-> ".join(c)
            for c in out]


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    src = argv[1]
    problems = check_includes(src)
    if len(argv) == 3:
        problems += module_cycles(module_graph(list(objects(argv[2]))))
    known = KNOWN if os.path.abspath(src) == os.path.abspath(
        os.path.join(os.path.dirname(__file__), "..", "..")) else set()
    if len(argv) != 3:
        known = {k for k in known if not k.startswith("calls go around")}
    for k in sorted(known - set(problems)):
        problems.append("'%s' is listed as known but no longer occurs: "
                        "remove it from KNOWN" % k)
    problems = [p for p in problems if p not in known]
    for k in sorted(known):
        print("layering: known, being removed: " + k)
    for p in problems:
        print("layering: " + p)
    if problems:
        print("layering: %d problem(s); the rules are in %s and docs/index.rst"
              % (len(problems), os.path.basename(__file__)))
        return 1
    print("layering: the include rules hold and no files call each other in a cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
