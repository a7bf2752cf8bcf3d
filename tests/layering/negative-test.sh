#!/bin/bash
# negative-test.sh CHECKER: the layering check must fail on a tree that
# breaks each of its rules (tests/layering/bad/): an include upwards, an
# include cycle, a layer-owned system header, and two files that call each
# other. A checker that lets any of them pass fails this test.
set -u
checker=$1
bad=$(cd "$(dirname "$0")/bad" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/obj"
for f in vrmbadping vrmbadpong; do
    cc -c "$bad/driver/rdma/$f.c" -o "$work/obj/$f.c.o" || exit 1
done
out=$(python3 "$checker" "$bad" "$work" 2>&1); rc=$?
echo "$out"
[ $rc = 1 ] || { echo "FAIL: the checker exited $rc on a bad tree"; exit 1; }
for want in \
    "util/vrmbadfloor.c:3: includes xml/vrmbadxml.h: util may not include xml" \
    "include cycle: xml/vrmbadxml.h -> xml/vrmbadxml2.h -> xml/vrmbadxml.h" \
    "tools/cli/vrmbadcli.c:3: <infiniband/verbs.h> belongs to driver/rdma, driver/transport, driver/engine only" \
    "calls go around in a cycle between vrmbadping.c <-> vrmbadpong.c"; do
    grep -qF "$want" <<<"$out" || { echo "FAIL: not reported: $want"; exit 1; }
done
echo "ok: every violation was reported"
