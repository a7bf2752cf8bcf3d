#!/usr/bin/env python3
"""check-potfiles.py SOURCE_DIR: po/POTFILES.in lists exactly the source
files that hold translatable messages (_() or N_()), and each of them exists.

A file left out would ship its messages untranslated without anybody
noticing; a listed file that is gone breaks the template. Exits 1 with one
line per problem.
"""
import os
import re
import sys

MARK = re.compile(r'(?<![A-Za-z0-9_])N?_\(\s*"')
TOPS = ["util", "xml", "driver", "tools"]


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    src = argv[1]
    listed = []
    with open(os.path.join(src, "po", "POTFILES.in")) as fh:
        for line in fh:
            line = line.strip()
            if line and not line.startswith("#"):
                listed.append(line)
    problems = []
    for f in listed:
        if not os.path.isfile(os.path.join(src, f)):
            problems.append("%s is listed in po/POTFILES.in but does not exist" % f)
    seen = set(listed)
    if len(seen) != len(listed):
        problems.append("po/POTFILES.in lists a file twice")
    for top in TOPS:
        for root, _, files in os.walk(os.path.join(src, top)):
            for name in sorted(files):
                if not name.endswith(".c"):
                    continue
                path = os.path.relpath(os.path.join(root, name), src)
                with open(os.path.join(src, path), encoding="utf-8",
                          errors="replace") as fh:
                    if MARK.search(fh.read()) and path not in seen:
                        problems.append("%s has translatable messages but is "
                                        "not listed in po/POTFILES.in" % path)
    for p in problems:
        print("potfiles: " + p)
    if problems:
        return 1
    print("potfiles: po/POTFILES.in lists the %d files with messages" % len(listed))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
