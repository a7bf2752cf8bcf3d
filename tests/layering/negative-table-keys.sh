#!/bin/bash
# negative-table-keys.sh CHECKER SRCROOT: check-table-keys.py must fail on
# a tree where each kind of table key is written by hand once: the three
# tables of SRCROOT, plus one file that builds an engine argv word, a
# stats-record key in JSON text and a typed parameter of a job statistic.
set -u
checker=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for f in driver/contract/vrmenginesettings.c driver/contract/vrmenginestats.c xml/vrmjobstat.c; do
    mkdir -p "$work/$(dirname "$f")"
    cp "$src/$f" "$work/$f"
done
mkdir -p "$work/driver/helper"
cat > "$work/driver/helper/vrmbadkeys.c" <<'C'
static const char *argvWord = "--qemu-path";
static const char *json = "{\"bytes-sent\": 0}";
static const char *param = "rdma.pinned-bytes";
C
out=$(python3 "$checker" "$work" 2>&1); rc=$?
echo "$out"
[ $rc = 1 ] || { echo "FAIL: the checker exited $rc on a tree with hand-written keys"; exit 1; }
for want in \
    "driver/helper/vrmbadkeys.c:1: engine option 'qemu-path' outside driver/contract/vrmenginesettings.c" \
    "driver/helper/vrmbadkeys.c:2: stats-record key 'bytes-sent' outside driver/contract/vrmenginestats.c" \
    "driver/helper/vrmbadkeys.c:3: job statistic 'pinned-bytes' outside xml/vrmjobstat.c"; do
    grep -qF "$want" <<<"$out" || { echo "FAIL: not reported: $want"; exit 1; }
done
echo "ok: every hand-written key was reported"
