#!/bin/bash
# stress-target.sh: `ninja -C build stress-engine`, issue 39's stress run
# (engine-stress.sh) in one two-host sandbox boot. Not a test: it runs for
# long (about a minute and a half per run of the default size) and prints
# the tally; its exit status says whether every run passed.
#
#   stress-target.sh SANDBOX ENGINE STREAMTEST STRESS_SH
#
# Settings, from the environment (the sandbox's hosts do not see it, so
# they are passed on the hosts' command line):
#   VRM_STRESS_RUNS   runs in the boot (default 30)
#   VRM_STRESS_SIZE   each stream's size (default 77M+13, the issue's case)
#   VRM_STRESS_HOG    host (default): one busy loop per core of this machine
#                     beside the sandbox, the load under which the failure
#                     was first seen; guest: a busy loop inside each host;
#                     none
#   VRM_STRESS_NETEM  tc netem options for both hosts' NICs, e.g.
#                     "delay 300ms loss 0.3%" (engine-lossy.sh's wire)
#   VRM_STRESS_ENGINE_OPTS  more engine options for both engines
#   VRM_STRESS_CAPTURE=1    keep a RoCE capture of each failed run in the
#                     sandbox's shared directory (VRM_SANDBOX_KEEP=DIR
#                     keeps that directory; roce-trace.py reads it)
set -u
sandbox=$1 engine=$2 streamtest=$3 stress=$4
runs=${VRM_STRESS_RUNS:-30}
size=${VRM_STRESS_SIZE:-77M+13}
hog=${VRM_STRESS_HOG:-host}

case $runs in
''|*[!0-9]*|0) echo "stress-engine: VRM_STRESS_RUNS must be a positive number, not '$runs'" >&2; exit 2 ;;
esac
case $hog in
host|guest|none) ;;
*) echo "stress-engine: VRM_STRESS_HOG must be host, guest or none, not '$hog'" >&2; exit 2 ;;
esac

q() { printf '%q' "$1"; }
inner="VRM_STRESS_NETEM=$(q "${VRM_STRESS_NETEM:-}") VRM_STRESS_CAPTURE=$(q "${VRM_STRESS_CAPTURE:-}")"
[ "$hog" = guest ] && inner="$inner VRM_STRESS_HOG=guest"
# shellcheck disable=SC2086
inner="$inner bash $(q "$stress") $(q "$engine") $(q "$streamtest") $runs $(q "$size") ${VRM_STRESS_ENGINE_OPTS:-}"

hogs=()
if [ "$hog" = host ]; then
    for _ in $(seq "$(nproc)"); do
        nice -n 0 bash -c 'while :; do :; done' &
        hogs+=($!)
    done
fi
trap '[ ${#hogs[@]} -gt 0 ] && kill "${hogs[@]}" 2>/dev/null' EXIT

# a run of 77 MiB takes one to two minutes; allow three, and the boot
timeout=$((runs * 180 + 120))
keep=()
[ -n "${VRM_SANDBOX_KEEP:-}" ] && keep=(--keep "$VRM_SANDBOX_KEEP")
bash "$sandbox" --hosts 2 --timeout "$timeout" "${keep[@]}" --a "$inner" --b "$inner"
