#!/usr/bin/env python3
"""check-table-keys.py: each table-owned key is spelled in its table only.

    check-table-keys.py SRCROOT

Three tables define the names that travel between processes (issue 38):
the engine's options (driver/contract/vrmenginesettings.c), the keys of the
engine's stats record (driver/contract/vrmenginestats.c) and the job
statistics (xml/vrmjobstat.c). Every codec walks its table; a key written
by hand elsewhere would be a second definition that can drift. This check
reads the keys out of the tables and looks, in the shipped sources (not
tests/), for a key in the shape that would be that second definition:

  an engine option as an argv word      "--qemu-path", "--channels=4"
  a stats-record key inside JSON text   "{\"bytes-sent\": 1}"
  a job statistic as a typed parameter  "rdma.bytes-sent"
  ... or as an XML attribute             " bytes-sent=\"1\""

ALLOWED lists the few literals of the same spelling that name something
else, each with its reason. Exit 0 with "ok: ...", or 1 with one line per
finding: FILE:LINE: the key, its table, and the line.
"""
import os
import re
import sys

TABLES = {
    "engine option": ("driver/contract/vrmenginesettings.c",
                      r"static const vrmEngineOption vrmEngineOptions\[\] = \{(.*?)\n\};"),
    "stats-record key": ("driver/contract/vrmenginestats.c",
                         r"static const vrmEngineStatKey vrmEngineStatKeys\[\] = \{(.*?)\n\};"),
    "job statistic": ("xml/vrmjobstat.c",
                      r"static const vrmJobStatInfo vrmJobStatTable\[\] = \{(.*?)\n\};"),
}

# (file, literal): the same spelling naming something else
ALLOWED = {
    # virt-rdma's own global option -c/--connect (a libvirt URI), not the
    # engine's --connect
    ("tools/cli/virt-rdma.c", "--connect"),
    ("tools/cli/virt-rdma.c", "--connect="),
    # the library example's own command line
    ("tools/lib/examples/migrate-app.c", "--chunk-size"),
    # the offer's and answer's capabilities attribute (migration XML), not
    # the job statistic
    ("xml/vrmmigrationdef.c", "<offer version=\\\"%u\\\" capabilities=\\\"0x%08x\\\""),
    ("xml/vrmmigrationdef.c", " version=\\\"%u\\\" capabilities=\\\"0x%08x\\\">\\n"),
    # a peer result's status attribute (peer.rng), not the stats key
    ("xml/vrmpeer.c", "<%s status=\\\"error\\\""),
}

SUFFIXES = (".c", ".h", ".sh", ".py")


def table_keys(root):
    out = {}
    for what, (path, pattern) in TABLES.items():
        with open(os.path.join(root, path), encoding="utf-8") as f:
            m = re.search(pattern, f.read(), re.S)
        if not m:
            sys.exit("check-table-keys: no table in %s" % path)
        keys = re.findall(r'\{\s*"([a-z0-9-]+)",', m.group(1))
        if not keys:
            sys.exit("check-table-keys: the table of %s has no keys" % path)
        out[what] = (path, keys)
    return out


def literals(text):
    """(line number, literal, line) of every "..." outside comments"""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text,
                  flags=re.S)
    for number, line in enumerate(text.split("\n"), 1):
        for lit in re.findall(r'"((?:[^"\\]|\\.)*)"', line):
            yield number, lit, line.strip()


def second_definition(what, key, lit):
    if what == "engine option":
        return lit == "--" + key or lit.startswith("--" + key + "=")
    if what == "stats-record key":
        return '\\"%s\\"' % key in lit
    return (lit == "rdma." + key or lit.startswith(key + "=") or
            re.search(r"[ <]%s=" % re.escape(key), lit) is not None)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check-table-keys.py SRCROOT")
    root = sys.argv[1]
    tables = table_keys(root)
    findings = []
    files = 0
    for top in ("driver", "xml", "util", "tools"):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith(SUFFIXES):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                files += 1
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for number, lit, line in literals(text):
                    if (rel, lit) in ALLOWED:
                        continue
                    for what, (owner, keys) in tables.items():
                        if rel == owner:
                            continue
                        for key in keys:
                            if second_definition(what, key, lit):
                                findings.append("%s:%d: %s '%s' outside %s: %s" % (
                                    rel, number, what, key, owner, line))
    for line in findings:
        print(line)
    if findings:
        print("FAIL: %d table keys written by hand; use the table's accessors" % len(findings))
        return 1
    print("ok: %d files, %s" % (files, ", ".join(
        "%d %ss" % (len(keys), what) for what, (_, keys) in tables.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
