#!/bin/bash
# in-turn.sh COMMAND...: several tests in one sandbox boot (a boot of two
# emulated hosts costs 15-20 s: CI time). Each host runs the COMMANDs in
# turn; before the next one, all hosts meet, so that a command never finds
# another host still in the previous one (its engines, its ports). Every
# COMMAND runs, whatever the ones before it did; the run fails if one of
# them failed, and the last lines say which.
set -u
host=${VRM_SANDBOX_HOST:?run inside vrm-sandbox}
shared=${VRM_SANDBOX_SHARED:?}
others=()
for h in a b c d; do
    [ "${#others[@]}" -lt $((${VRM_SANDBOX_HOSTS:-2} - 1)) ] || break
    [ "$h" = "$host" ] || others+=("$h")
done
failed=()
n=0
for cmd in "$@"; do
    n=$((n + 1))
    if [ $n -gt 1 ]; then
        touch "$shared/in-turn-$n-$host"
        # the commands have deadlines of their own; this one only bounds a
        # host that stopped without saying so
        deadline=$((SECONDS + 900))
        for other in "${others[@]}"; do
            until [ -e "$shared/in-turn-$n-$other" ]; do
                if [ $SECONDS -ge $deadline ]; then
                    echo "in-turn: host $other did not finish command $((n - 1)) within 900 s"
                    exit 1
                fi
                sleep 0.2
            done
        done
    fi
    echo "==== [$host] $n/$#: $cmd"
    bash -c "$cmd" || failed+=("$n: $cmd")
done
if [ ${#failed[@]} -gt 0 ]; then
    printf 'in-turn: FAIL on host %s: %s\n' "$host" "${failed[@]}"
    exit 1
fi
echo "in-turn: host $host passed all $# command(s)"
