#!/bin/bash
# negative-translation.sh CHECKER: check-translation.sh must fail on
# tests/i18n/bad-po/, whose de.po has a fuzzy, an untranslated, a missing
# and a stale message, and whose source cuts a message with a format macro.
set -u
out=$(bash "$1" "$(dirname "$0")/bad-po" 2>&1); rc=$?
echo "$out"
[ $rc = 1 ] || { echo "FAIL: the checker exited $rc"; exit 1; }
for want in "messages cut short at a positional directive" \
            "po/de.po has fuzzy or untranslated messages" \
            "po/de.po lacks messages of the current sources" \
            "po/de.po holds messages the sources no longer have"; do
    grep -qF "$want" <<<"$out" || { echo "FAIL: not reported: $want"; exit 1; }
done
grep -qF "a message de.po lacks" <<<"$out" || { echo "FAIL: the missing message is not named"; exit 1; }
echo "ok: every problem reported"
