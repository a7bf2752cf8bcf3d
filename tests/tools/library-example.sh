#!/bin/bash
# library-example.sh MIGRATE_APP: the library's example program, built as a
# management application builds it, tells failures apart by vrmLastError()'s
# code and domain (issue 18 item 7), against libvirt's test driver.
set -u
app=${1:?usage: library-example.sh MIGRATE_APP}
export LC_ALL=C.UTF-8
failures=0

# run WANT_STATUS WANT_LINE ARGS...
run() {
    local want=$1 line=$2 out rc
    shift 2
    out=$("$app" "$@" 2>&1); rc=$?
    if [ "$rc" != "$want" ] || ! grep -qF -- "$line" <<<"$out"; then
        echo "FAIL: migrate-app $*: status $rc (want $want), output: $out (want: $line)"
        failures=$((failures + 1))
    else
        echo "ok: migrate-app $* -> $rc: $out"
    fi
}

# the library's own check of the caller's typed parameters
run 1 "failed: code 3, from the library: chunk size 1000 is not a power of two" \
    -c test:///default --chunk-size 1000 test test:///default
# a domain that is not RDMA-enabled (test:///default's has no metadata):
# the caller's mistake, found by the library
run 1 "failed: code 3, from the library: the domain 'test' is not RDMA-enabled" \
    -c test:///default test test:///default
# no helper on this host: VRM_ERROR_PEER, from the helper's side; the test
# driver's node file gives a running domain that is RDMA-enabled
node=$(mktemp --suffix=.xml)
trap 'rm -f "$node"' EXIT
cat > "$node" <<'XML'
<node>
  <domain type='test'>
    <name>rdma1</name>
    <uuid>4dea22b3-1d52-d8f3-2516-782e98ab3fa0</uuid>
    <memory>8192</memory>
    <os><type>hvm</type></os>
    <metadata>
      <rdma:migration xmlns:rdma='http://virt-rdma.org/xmlns/migration/1.0'/>
    </metadata>
  </domain>
</node>
XML
run 1 "failed: code 13, from the helper: the virt-rdma helper (virt-rdmad) is not running on this host" \
    -c "test://$node" --helper-socket /nonexistent/virt-rdmad.sock rdma1 test:///default
# usage
run 2 "usage: migrate-app" test
[ "$failures" = 0 ] || exit 1
