#!/bin/bash
# cli-usage.sh VIRT_RDMA COMPLETION: virt-rdma's command line as virsh users
# expect it (issue 18): every option checked before libvirt or the helper
# is contacted, each error naming its option, usage errors exit 2, help
# headers with the program's name, the domain by name, id or uuid and by
# virsh's named forms, and bash completion offering every option.
set -u
cli=${1:?usage: cli-usage.sh VIRT_RDMA COMPLETION}
completion=${2:?usage: cli-usage.sh VIRT_RDMA COMPLETION}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LC_ALL=C.UTF-8
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# A source URI that cannot be opened: an option checked after connecting
# would fail with libvirt's error and status 1 instead.
nowhere="test://$tmp/no-such-file.xml"

# expect STATUS TEXT ARGS...: virt-rdma ARGS exits STATUS, stderr has TEXT
expect() {
    local want=$1 text=$2 rc
    shift 2
    "$cli" "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
    if [ "$rc" != "$want" ]; then
        fail "virt-rdma $*: status $rc, not $want; stderr: $(cat "$tmp/err")"
    elif ! grep -qF -- "$text" "$tmp/err"; then
        fail "virt-rdma $*: stderr does not say '$text': $(cat "$tmp/err")"
    else
        echo "ok: virt-rdma $* -> $rc: $(head -1 "$tmp/err")"
    fi
}

expect 2 "--channels takes a number from 1 to 64, not '0'" migrate -c "$nowhere" --channels=0 web1 qemu:///x
expect 2 "--chunk-size takes a power of two from 64K to 64M, not '1000'" migrate -c "$nowhere" --chunk-size=1000 web1 qemu:///x
expect 2 "--chunk-size 'lots' is not a size" migrate -c "$nowhere" --chunk-size=lots web1 qemu:///x
expect 2 "--ring-depth takes a number from 2 to 1024, not '1'" migrate -c "$nowhere" --ring-depth=1 web1 qemu:///x
expect 2 "--rdma-port takes a number from 1 to 255, not '0'" migrate -c "$nowhere" --rdma-port=0 web1 qemu:///x
expect 2 "--rdma-address 'foo' is not an IPv4 or IPv6 address" migrate -c "$nowhere" --rdma-address=foo web1 qemu:///x
expect 2 "--rdma-device 'a/b' is not an RDMA device name" migrate -c "$nowhere" --rdma-device=a/b web1 qemu:///x
expect 2 "3 RDMA channels need a parallel migration" migrate -c "$nowhere" --channels=3 web1 qemu:///x
expect 2 "4 parallel connections need 5" migrate -c "$nowhere" --parallel --parallel-connections 4 --channels 3 web1 qemu:///x
expect 2 "--parallel-connections needs --parallel" migrate -c "$nowhere" --parallel-connections 4 web1 qemu:///x
expect 2 "--timeout takes a positive number of seconds, not -1" migrate -c "$nowhere" --timeout -1 web1 qemu:///x
expect 2 "--bandwidth takes a positive number of MiB/s, not -5" migrate -c "$nowhere" --bandwidth -5 web1 qemu:///x
expect 2 "Unknown option --bogus" migrate --bogus web1 qemu:///x
expect 2 "--postcopy-after-precopy needs --postcopy" migrate -c "$nowhere" --postcopy-after-precopy web1 qemu:///x
expect 2 "--timeout-postcopy needs --timeout" migrate -c "$nowhere" --postcopy --timeout-postcopy web1 qemu:///x
expect 2 "--timeout-suspend needs --timeout" migrate -c "$nowhere" --timeout-suspend web1 qemu:///x
expect 2 "--timeout-suspend and --timeout-postcopy exclude each other" migrate -c "$nowhere" --postcopy --timeout 5 --timeout-suspend --timeout-postcopy web1 qemu:///x
expect 2 "--timeout-postcopy needs --postcopy" migrate -c "$nowhere" --timeout 5 --timeout-postcopy web1 qemu:///x
expect 2 "--postcopy-bandwidth takes a positive number of MiB/s, not -3" migrate -c "$nowhere" --postcopy --postcopy-bandwidth -3 web1 qemu:///x
expect 2 "--postcopy-resume needs --postcopy" migrate -c "$nowhere" --postcopy-resume web1 qemu:///x
expect 2 "a post-copy recovery takes no RDMA parameter ('rdma.chunk-size')" migrate -c "$nowhere" --postcopy --postcopy-resume --chunk-size 1M web1 qemu:///x
# virsh options this design cannot take: refused with why and what instead
expect 2 "--tunnelled cannot be used with virt-rdma: a tunnelled migration" migrate -c "$nowhere" --tunnelled web1 qemu:///x
expect 2 "--direct cannot be used with virt-rdma" migrate -c "$nowhere" --direct web1 qemu:///x
expect 2 'use --migrateuri "$(virt-rdma uri DOMAIN)"' migrate -c "$nowhere" --migrateuri unix:///x web1 qemu:///x
expect 2 "--listen-address cannot be used with virt-rdma" migrate -c "$nowhere" --listen-address 192.0.2.1 web1 qemu:///x
expect 2 "--disks-uri cannot be used with virt-rdma: virt-rdma sets the disks URI to the domain's own socket" migrate -c "$nowhere" --copy-storage-all --disks-uri unix:///x web1 qemu:///x
expect 2 "--disks-port cannot be used with virt-rdma" migrate -c "$nowhere" --copy-storage-all --disks-port 49153 web1 qemu:///x
expect 2 "--migrate-disks needs --copy-storage-all or --copy-storage-inc" migrate -c "$nowhere" --migrate-disks vda web1 qemu:///x
expect 2 "libvirt cannot encrypt the copy of disks over a UNIX socket" migrate -c "$nowhere" --copy-storage-all --tls web1 qemu+tcp://b/system
# virsh's pass-through options (issue 17), checked before any connection
expect 2 "--auto-converge-initial takes a percentage from 0 to 100, not '101'" migrate -c "$nowhere" --auto-converge --auto-converge-initial 101 web1 qemu:///x
expect 2 "--auto-converge-increment needs --auto-converge" migrate -c "$nowhere" --auto-converge-increment 10 web1 qemu:///x
expect 2 "--tls needs --tls-destination: the destination URI 'qemu:///x' names no host" migrate -c "$nowhere" --tls web1 qemu:///x
expect 2 "--tls-destination needs --tls" migrate -c "$nowhere" --tls-destination b web1 qemu+tcp://b/system
expect 2 "--comp-methods 'zlib,,zstd' has an empty item" migrate -c "$nowhere" --compressed --comp-methods zlib,,zstd web1 qemu:///x
expect 2 "--persistent-xml needs --persistent" migrate -c "$nowhere" --persistent-xml /dev/null web1 qemu:///x
expect 2 "--xml: " migrate -c "$nowhere" --xml "$tmp/no-such.xml" web1 qemu:///x
: > "$tmp/empty.xml"
expect 2 "--xml: '$tmp/empty.xml' is not a domain XML file" migrate -c "$nowhere" --xml "$tmp/empty.xml" web1 qemu:///x
# with --tls and a DESTURI that names a host, the options are right: the
# source libvirt is contacted (and fails)
expect 1 "no-such-file.xml" migrate -c "$nowhere" --tls --auto-converge --auto-converge-initial 30 --compressed --comp-methods zlib web1 qemu+tcp://b/system
expect 2 "migrate takes a domain and a destination URI" migrate --domain web1
# virsh migrate's other options: passed through, checked first, or refused
# with the reason (issue 35 item 6)
expect 1 "no-such-file.xml" migrate -c "$nowhere" --change-protection --graphicsuri spice://hv-2:5900 --compressed --comp-methods mt,xbzrle --comp-mt-level 3 --comp-mt-threads 4 --comp-mt-dthreads 2 --comp-xbzrle-cache 64M web1 qemu+tcp://b/system
expect 2 "--comp-mt-level takes a number from 0 to 9, not '12'" migrate -c "$nowhere" --compressed --comp-mt-level 12 web1 qemu:///x
expect 2 "--comp-mt-threads needs --compressed" migrate -c "$nowhere" --comp-mt-threads 4 web1 qemu:///x
expect 2 "--comp-xbzrle-cache 'lots' is not a size" migrate -c "$nowhere" --compressed --comp-xbzrle-cache lots web1 qemu:///x
expect 2 "an offline migration moves the definition only, no memory" migrate -c "$nowhere" --offline web1 qemu:///x
expect 2 "unexpected argument 'extra'" migrate web1 qemu:///x extra
expect 2 "unknown command 'migarte'; the commands are migrate, jobinfo, jobs, events, uri, capabilities and bench" migarte web1
# virsh's habits: -c URI before the command (for those that use libvirt),
# help COMMAND
expect 1 "no-such-file.xml" -c "$nowhere" migrate --live web1 qemu+tcp://b/system
expect 1 "no-such-file.xml" --connect="$nowhere" uri web1
expect 2 "'jobs' does not use libvirt: -c goes with migrate, jobinfo and uri" -c "$nowhere" jobs
expect 1 "no-such-file.xml" uri -c "$nowhere" --domain web1
expect 2 "uri takes one domain" uri -c "$nowhere" --domain web1 web2
# a UUID needs no libvirt: the path, with a warning that nothing was checked
expect 0 "virt-rdma: warning: cannot ask libvirt" uri -c "$nowhere" 7B9C1A2E-3F4D-4E5F-8A6B-0C1D2E3F4A5B
grep -qx "unix:///run/virt-rdma/qemu/7b9c1a2e-3f4d-4e5f-8a6b-0c1d2e3f4a5b/migrate.sock" "$tmp/out" &&
    echo "ok: virt-rdma uri UUID without libvirt: $(cat "$tmp/out")" ||
    fail "virt-rdma uri UUID without libvirt printed '$(cat "$tmp/out")'"

expect 2 "-c takes a libvirt URI and a command" -c "$nowhere"
expect 2 "unknown command 'nosuch'" help nosuch
"$cli" help events | grep -qE "^  virt-rdma events \[" && echo "ok: virt-rdma help events" ||
    fail "virt-rdma help events does not print the events command's help"
expect 2 "bench runs as '--server --address ADDR'" bench
# an engine that dies at once is reported at once, with its exit status,
# not after the connect deadline (it used to hang in accept())
start=$SECONDS
VRM_ENGINE=/bin/false expect 1 "the destination engine ended before it connected channel 0" bench --client 127.0.0.1
grep -qF "the engine exited with status 1" "$tmp/err" || fail "bench does not report the engine's exit status: $(cat "$tmp/err")"
[ $((SECONDS - start)) -lt 20 ] || fail "bench took $((SECONDS - start)) s to notice its engine ended"
# the same on the server's side: the engine's end, at once, not a write
# that times out two minutes later (issue 35)
start=$SECONDS
VRM_ENGINE=/bin/false expect 1 "the engine ended before the streams were through" bench --server --address 127.0.0.1
grep -qF "the engine exited with status 1" "$tmp/err" || fail "bench --server does not report the engine's exit status: $(cat "$tmp/err")"
grep -qF "write failed" "$tmp/err" && fail "bench --server blames a write: $(cat "$tmp/err")"
[ $((SECONDS - start)) -lt 20 ] || fail "bench --server took $((SECONDS - start)) s to notice its engine ended"
# the options are right: now the source libvirt is contacted, and fails
expect 1 "no-such-file.xml" migrate -c "$nowhere" --channels=1 web1 qemu:///x

# the domain by name, id and uuid, positional or --domain: found (the
# migration then fails later, at the helper or libvirt, not at the lookup)
for d in test 1 6695eb01-f6a4-8304-79aa-97f2502e193f; do
    for form in positional named; do
        if [ $form = named ]; then
            args=(--domain "$d" --desturi test:///default)
        else
            args=("$d" test:///default)
        fi
        "$cli" migrate -c test:///default --live "${args[@]}" >"$tmp/out" 2>"$tmp/err"
        if grep -qi "not found\|no domain" "$tmp/err"; then
            fail "virt-rdma migrate ${args[*]}: the domain was not found: $(cat "$tmp/err")"
        else
            echo "ok: domain '$d' ($form) found"
        fi
    done
done
expect 1 "nosuch" migrate -c test:///default --live --domain nosuch --desturi test:///default
# a domain that is not RDMA-enabled (test:///default's has no metadata):
# refused at once, with how to enable it, by uri and by migrate
expect 1 "virt-rdma: error: the domain 'test' is not RDMA-enabled (no <rdma:migration> element in its metadata): enable it with virsh metadata test --uri http://virt-rdma.org/xmlns/migration/1.0 --key rdma --set '<migration/>' --live --config" uri -c test:///default test
expect 1 "the domain 'test' is not RDMA-enabled" migrate -c test:///default --live test test:///default

# help headers name the program and the command
for c in migrate jobinfo jobs events uri capabilities bench; do
    if "$cli" "$c" --help | grep -qE "^  virt-rdma $c \["; then
        echo "ok: virt-rdma $c --help names 'virt-rdma $c'"
    else
        fail "virt-rdma $c --help: header is '$("$cli" "$c" --help | sed -n 2p)'"
    fi
    # every option of the command is offered by the completion
    for opt in $("$cli" "$c" --help | grep -oE '^\s+(-[a-z], )?--[a-z0-9-]+' | grep -oE -- '--[a-z0-9-]+'); do
        grep -qE -- "(^|[ \"|])$opt([ \"|)]|$)" "$completion" || fail "bash completion lacks $c $opt"
    done
done
grep -q '"migrate jobinfo jobs events uri capabilities bench' "$completion" || fail "bash completion lacks a command"
# the capability table's options are the command's (util/vrmcapability.c:
# --rdma-pin-all; write-imm has none, and none is offered)
"$cli" migrate --help | grep -q -- "--rdma-pin-all" || fail "virt-rdma migrate has no --rdma-pin-all"
"$cli" migrate --help | grep -q -- "write-imm" && fail "virt-rdma migrate offers a write-imm option the table does not name"

[ "$failures" = 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all cases passed"
