#!/bin/bash
# rdma-migrate.sh SCENARIO...: live-migrate the e2e guest from host a to
# host b with `virt-rdma migrate`, through virt-rdmad, the libvirt hook and
# the engines, over rxe. Several scenarios that end in a migrated guest
# (one-channel, demo, parallel, pin-all) run one after the other on the same
# hosts and daemons, each with its own guest (g1, g2, ...), which b destroys
# once its memory verified; a failure scenario runs alone.
#
#   one-channel   --live --p2p --persistent --verbose
#   demo          one-channel, showing each host's `virt-rdma capabilities`
#                 first (the README's main job)
#   parallel      the same with --parallel --parallel-connections 4
#   parallel-zstd parallel with multifd zstd compression (--compressed
#                 --comp-methods zstd; libvirt >= 9.4, so the compat suite's
#                 Debian 13 hosts: libvirt 9.0 refuses the method)
#   pin-all       the same with --rdma-pin-all
#   no-helper     virt-rdmad is not running on b: a clear error, the guest
#                 keeps running on a, nothing left behind
#   bad-metadata  the domain's <rdma:migration> is invalid: a clear error
#                 naming it, the guest keeps running, nothing left behind
#   abort         virsh domjobabort in the middle of a (slowed) migration:
#                 virt-rdma migrate fails, the engines on both hosts end,
#                 the guest keeps running on the source
set -u
. "$(dirname "$0")/e2e-lib.sh"
[ $# -ge 1 ] || fail "usage: rdma-migrate.sh SCENARIO..."
scenarios=("$@")
virt_rdma=$VRM_BUILD_DIR/tools/cli/virt-rdma
dest=qemu+tcp://$VRM_PEER_ADDR/system
if [ $# -gt 1 ]; then
    for scenario in "$@"; do
        case "$scenario" in
            one-channel|demo|parallel|parallel-zstd|pin-all) ;;
            *) fail "scenario '$scenario' runs alone, not with others" ;;
        esac
    done
fi

# run_b SCENARIO N: the destination's side of the Nth migration (guest gN).
run_b() {
    local scenario=$1 n=$2 sfx= g=g$2
    [ "$n" = 1 ] || sfx=-$n
    wait_flag "migrated$sfx" 600
    case "$scenario" in
        no-helper|bad-metadata|abort)
            virsh -q list --all | grep -q "$g" && fail "$g exists on the destination after a failed migration"
            check_no_leftovers ;;
        *)
            check_arrived "$g"
            check_no_leftovers
            # its vCPU is this host's CPU too: not during the next migration
            virsh -q destroy "$g" >/dev/null ;;
    esac
    flag "verified-b$sfx"
    say "$scenario: done"
}

if [ "$VRM_SANDBOX_HOST" = b ]; then
    if [ "${scenarios[0]}" = no-helper ]; then start_virt_rdma --no-helper; else start_virt_rdma; fi
    start_libvirt
    [ "${scenarios[0]}" = demo ] && { say "virt-rdma capabilities:"; "$virt_rdma" capabilities; }
    flag ready-b
    for i in "${!scenarios[@]}"; do
        run_b "${scenarios[$i]}" $((i + 1))
    done
    say "done"
    exit 0
fi

start_virt_rdma
start_libvirt

# run_a SCENARIO N: the Nth migration, of guest gN, from this host.
run_a() {
    local scenario=$1 n=$2 sfx= g=g$2 opts out rc mpid deadline info
    [ "$n" = 1 ] || sfx=-$n
    define_guest "$g" 128 "dirty_kb=2048"
    enable_rdma "$g"
    [ "$n" = 1 ] && wait_flag ready-b 180
    [ "$scenario" = demo ] && { say "virt-rdma capabilities:"; "$virt_rdma" capabilities; }

    opts=(--live --p2p --persistent --verbose)
    case "$scenario" in
        parallel) opts+=(--parallel --parallel-connections 4) ;;
        parallel-zstd) opts+=(--parallel --parallel-connections 4 --compressed --comp-methods zstd) ;;
        pin-all) opts+=(--rdma-pin-all) ;;
        abort) opts+=(--bandwidth 2) ;;     # MiB/s: long enough to abort it
        bad-metadata)
            virsh -q metadata "$g" --uri "$VRM_NS" --key rdma \
                --set '<migration><chunk size="3000"/></migration>' || fail "cannot set the metadata" ;;
    esac

    say "$scenario: virt-rdma migrate ${opts[*]} $g $dest"
    if [ "$scenario" = abort ]; then
        "$virt_rdma" migrate "${opts[@]}" "$g" "$dest" > /tmp/migrate.out 2>&1 &
        mpid=$!
        deadline=$((SECONDS + 120))
        until virsh domjobinfo "$g" 2>/dev/null | grep -qE "^Data processed: +[1-9]"; do
            [ $SECONDS -ge $deadline ] && fail "the migration never started moving data"
            sleep 0.5
        done
        say "aborting the migration with virsh domjobabort"
        virsh domjobabort "$g" || fail "virsh domjobabort failed"
        wait "$mpid"; rc=$?
        out=$(tr '\r' '\n' < /tmp/migrate.out)
        echo "$out" | grep -v '^$' | tail -3
    elif [ "$scenario" = demo ]; then
        # Live progress on the terminal, as a user sees it.
        "$virt_rdma" migrate "${opts[@]}" "$g" "$dest" 2>&1 | tee /tmp/migrate.out; rc=${PIPESTATUS[0]}
        out=$(cat /tmp/migrate.out)
    else
        out=$("$virt_rdma" migrate "${opts[@]}" "$g" "$dest" 2>&1); rc=$?
        echo "$out" | tr '\r' '\n' | grep -v '^$' | tail -8
    fi

    case "$scenario" in
        no-helper|bad-metadata|abort)
            [ $rc -ne 0 ] || fail "virt-rdma migrate succeeded; it should have failed"
            if [ "$scenario" = no-helper ]; then
                grep -q "virt-rdmad" <<<"$out" || fail "the error does not say the destination helper is missing"
            elif [ "$scenario" = abort ]; then
                grep -qi "cancel\|abort" <<<"$out" || fail "the error does not say the migration was cancelled"
            else
                grep -q "chunk" <<<"$out" && grep -q "3000" <<<"$out" ||
                    fail "the error does not name the bad chunk size"
            fi
            [ "$(virsh domstate "$g")" = running ] || fail "$g is not running on the source after the failure"
            wait_serial "$g" "verify [0-9]+ ok" 120
            check_no_leftovers
            flag "migrated$sfx"
            wait_flag "verified-b$sfx" 120 ;;
        *)
            [ $rc -eq 0 ] || fail "virt-rdma migrate failed (status $rc)"
            check_migrated_source "$g"
            info=$("$virt_rdma" jobinfo --completed "$g") || fail "virt-rdma jobinfo --completed failed"
            echo "$info"
            python3 - "$info" <<'PY' || fail "RDMA bytes sent are fewer than the memory libvirt moved"
import re, sys
units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
def size(label):
    m = re.search(r"^%s\s+([\d.]+) (\w+)" % re.escape(label), sys.argv[1], re.M)
    if not m:
        sys.exit("no '%s' line" % label)
    return float(m.group(1)) * units[m.group(2)]
mem, rdma = size("Memory processed:"), size("RDMA bytes sent:")
print("memory processed %.0f bytes, RDMA bytes sent %.0f bytes" % (mem, rdma))
sys.exit(0 if rdma >= mem else 1)
PY
            # the source engine's own CPU time reaches the tool (moving tens of
            # MiB over rxe costs it far more than a millisecond)
            grep -qE "^RDMA engine CPU: +[1-9][0-9]* +ms *$" <<<"$info" ||
                fail "virt-rdma jobinfo shows no engine CPU time"
            # rc 0 alone does not prove a parallel migration: QEMU must have
            # opened the main connection and 4 multifd ones through the engine.
            if [ "$scenario" = parallel ] || [ "$scenario" = parallel-zstd ]; then
                grep -qE "^RDMA channels: +5 *$" <<<"$info" ||
                    fail "the RDMA job did not carry 5 channels (main + 4 multifd)"
            fi
            # compressed by QEMU before the engines: the guest's 128 MiB,
            # filled with a page pattern, cross in far fewer bytes
            if [ "$scenario" = parallel-zstd ]; then
                python3 - "$info" <<'PY' || fail "multifd zstd did not compress: RDMA carried half the guest's RAM or more"
import re, sys
m = re.search(r"^RDMA bytes sent:\s+([\d.]+) (\w+)", sys.argv[1], re.M)
sent = float(m.group(1)) * {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[m.group(2)]
print("multifd zstd: RDMA bytes sent %.1f MiB for a guest of 128 MiB" % (sent / 2**20))
sys.exit(0 if sent < 64 * 2**20 else 1)
PY
            fi
            check_no_leftovers
            flag "migrated$sfx"
            wait_flag "verified-b$sfx" 300 ;;
    esac
    say "$scenario: done"
}

for i in "${!scenarios[@]}"; do
    run_a "${scenarios[$i]}" $((i + 1))
done
say "done"
