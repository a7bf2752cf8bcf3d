#!/bin/bash
# negative-test.sh CHECKER: check-potfiles.py must fail on tests/i18n/bad/,
# which lists a file that is gone and forgets a file with a message.
set -u
out=$(python3 "$1" "$(dirname "$0")/bad" 2>&1); rc=$?
echo "$out"
[ $rc = 1 ] || { echo "FAIL: the checker exited $rc"; exit 1; }
grep -qF "util/gone.c is listed in po/POTFILES.in but does not exist" <<<"$out" || { echo "FAIL: the missing file was not reported"; exit 1; }
grep -qF "util/forgotten.c has translatable messages but is not listed" <<<"$out" || { echo "FAIL: the forgotten file was not reported"; exit 1; }
echo "ok: both problems reported"
