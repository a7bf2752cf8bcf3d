#!/bin/bash
# negative-message-style.sh CHECKER: check-message-style.py must fail on
# tests/i18n/bad-style/, naming its two messages that break the style (a
# capital first letter, a final period) and none of those it exempts.
set -u
out=$(python3 "$1" "$(dirname "$0")/bad-style" 2>&1); rc=$?
echo "$out"
[ $rc = 1 ] || { echo "FAIL: the checker exited $rc"; exit 1; }
grep -qF "tools/sample.c:6: starts with a capital letter: 'Cannot open the socket'" <<<"$out" ||
    { echo "FAIL: the capital first letter was not reported"; exit 1; }
grep -qF "tools/sample.c:7: ends with a period: 'the peer closed the channel.'" <<<"$out" ||
    { echo "FAIL: the final period was not reported"; exit 1; }
grep -qF "2 messages break libvirt's message style" <<<"$out" ||
    { echo "FAIL: an exempt or well-formed message was reported"; exit 1; }
echo "ok: both problems reported, nothing else"
