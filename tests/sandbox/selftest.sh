#!/bin/bash
# selftest.sh VRM-SANDBOX: the sandbox reports failures instead of hiding them.
set -u
sandbox=$1
fails=0
check() {
    if eval "$2"; then echo "ok - $1"; else echo "not ok - $1"; fails=$((fails + 1)); fi
}

# one boot for these (CI time): it writes its root, then fails
out=$("$sandbox" --timeout 120 --a 'touch /etc/vrm-sandbox-leak && echo wrote; echo visible-output; exit 7' 2>&1); rc=$?
check "a failing command fails the run" '[ $rc -ne 0 ]'
check "its output and status reach the host" \
    'grep -q visible-output <<<"$out" && grep -q "exited with status 7" <<<"$out"'
check "the guest may write its root (tmpfs overlay)" 'grep -q wrote <<<"$out"'
check "nothing it writes reaches the host" '[ ! -e /etc/vrm-sandbox-leak ]'

start=$SECONDS
out=$("$sandbox" --timeout 25 --a 'echo started; sleep 1000' 2>&1); rc=$?
took=$((SECONDS - start))
check "a hung guest fails the run" '[ $rc -ne 0 ]'
check "it is killed at the deadline (took ${took}s)" '[ $took -lt 40 ]'
check "the report names the deadline and shows the console" \
    'grep -q "did not finish within 25s" <<<"$out" && grep -q "console of host a" <<<"$out"'

echo "1..7"
[ $fails -eq 0 ]
