#!/usr/bin/env python3
"""build-depends.py: debian/control's Build-Depends hold what the build
and its unit tests need (issue 36), so that a clean chroot (sbuild,
pbuilder, a buildd) builds the package as CI does.

    build-depends.py MESON_BUILD DEBIAN_CONTROL

1. Every library of meson.build's `deps_wanted` table (the one place that
   names each library, its -dev package and its version) is a
   Build-Depends entry of that package with the same version.
2. Every program the unit suite runs is provided by a Build-Depends entry
   marked <!nocheck> (or an unmarked one): UNIT_TOOLS below.
Exit 0 with "ok: ..." or 1 with a line per missing or different entry.
"""
import re
import sys

# program the unit suite runs -> the Debian package that provides it
UNIT_TOOLS = {
    "certtool": "gnutls-bin",           # tests/helper: the TLS material
    "virsh": "libvirt-clients",         # tests/tools: the virsh shim
    "python3": "python3",               # layering, message style, roce-trace
    "msgfmt": "gettext",                # translation checks
    # the translation check's German locale (localedef needs the locale
    # sources): Debian 13's glibc ignores LANGUAGE under C.UTF-8
    "localedef -i de_DE": "locales",
    "apparmor_parser": "apparmor",      # apparmor-abstractions
    # vrmhelpermetricstest: Prometheus' parser reads the metrics file
    "python3 -m prometheus_client": "python3-prometheus-client",
    # the JSON tests: virt-rdma's output against docs/virt-rdma.schema.json
    "python3 -m jsonschema": "python3-jsonschema",
}


def meson_deps(text):
    """(package, version constraint) of each deps_wanted entry"""
    table = re.search(r"deps_wanted\s*=\s*\{(.*?)\n\}", text, re.S)
    if not table:
        sys.exit("build-depends: no deps_wanted table in meson.build")
    out = {}
    for pc, pkg, ver in re.findall(r"\[\s*'([^']+)',\s*'([^']+)',\s*'([^']+)'\s*\]",
                                   table.group(1)):
        out[pkg] = ver.replace(" ", "")
    if not out:
        sys.exit("build-depends: the deps_wanted table has no entries")
    return out


def build_depends(text):
    """package -> (version constraint or '', restrictions or '')"""
    m = re.search(r"^Build-Depends:(.*?)(?=^\S)", text, re.S | re.M)
    if not m:
        sys.exit("build-depends: debian/control has no Build-Depends field")
    out = {}
    for entry in m.group(1).split(","):
        entry = " ".join(entry.split())
        if not entry:
            continue
        e = re.match(r"([a-z0-9][a-z0-9.+-]*)(?:\s*\(([^)]*)\))?\s*(<[^>]*>)?$", entry)
        if not e:
            sys.exit("build-depends: cannot read the entry '%s'" % entry)
        out[e.group(1)] = ((e.group(2) or "").replace(" ", ""), e.group(3) or "")
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        wanted = meson_deps(f.read())
    with open(sys.argv[2]) as f:
        have = build_depends(f.read())
    bad = []
    for pkg, ver in sorted(wanted.items()):
        if pkg not in have:
            bad.append("%s (%s) is needed by meson.build but not in Build-Depends" % (pkg, ver))
        elif have[pkg][0] != ver:
            bad.append("%s: Build-Depends asks (%s), meson.build needs (%s)"
                       % (pkg, have[pkg][0] or "any version", ver))
    for tool, pkg in sorted(UNIT_TOOLS.items()):
        if pkg not in have:
            bad.append("%s (the unit suite runs %s) is not in Build-Depends; add it as "
                       "'%s <!nocheck>'" % (pkg, tool, pkg))
        elif have[pkg][1] not in ("", "<!nocheck>"):
            bad.append("%s is in Build-Depends only for %s, the unit suite needs it"
                       % (pkg, have[pkg][1]))
    for line in bad:
        print("FAIL: " + line)
    if bad:
        return 1
    print("ok: Build-Depends hold the %d -dev packages meson.build names and the %d "
          "programs of the unit suite" % (len(wanted), len(UNIT_TOOLS)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
