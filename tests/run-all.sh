#!/bin/bash
# run-all.sh: the one command that passes virt-rdma's tests on a fresh
# Debian 12 machine, as root. It installs what is needed, builds, runs the
# unit, rdma and e2e suites (the latter two in the Soft-RoCE sandbox), the
# compat suite (the e2e scenarios on Debian 13 sandbox hosts, a root it
# makes with mmdebstrap from the Debian archive), builds
# the unit tier again with AddressSanitizer and UndefinedBehaviorSanitizer,
# replays every fuzzer's seeds and regression inputs and runs each fuzzer
# (XML, wire codec, channel state machines, stats record) for a bounded
# time, checks that the translation template builds, builds the Debian
# packages for Debian 12 and 13 in clean buildd roots (with the unit suite,
# lintian and autopkgtest) and shows that dropping a Build-Depends line
# breaks that build, and ends with the line `N passed, N failed`.
#
#   --no-install     skip apt-get (the packages are already there)
#   --fuzz-seconds N run each fuzzer N seconds (default 60, what the security
#                    issue asks of CI; longer campaigns run apart:
#                    tests/fuzz/run-fuzz.sh BUILDDIR SECONDS)
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
install=1
fuzz_seconds=60
while [ $# -gt 0 ]; do
    case "$1" in
        --no-install) install=0; shift ;;
        --fuzz-seconds) fuzz_seconds=$2; shift 2 ;;
        *) echo "run-all.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done

if [ "$install" = 1 ]; then
    bash tools/install-deps.sh || { echo "run-all.sh: installing packages failed"; echo "0 passed, 1 failed"; exit 1; }
fi

out=${VRM_TEST_DIR:-$top/build-tests}
rm -rf "$out"
mkdir -p "$out"
passed=0
failed=0
step() { echo; echo "==== $* ===="; }
# not_passed WHAT: one failure that is not a meson test, named again at the end
not_passed() { echo "not passed: $*" >> "$out/not-passed"; failed=$((failed + 1)); }

# count_meson DIR: add the results of DIR/meson-logs/testlog.json.
count_meson() {
    local log=$1/meson-logs/testlog.json counts
    if [ ! -f "$log" ]; then
        not_passed "the tests of $1 (no $log)"
        return
    fi
    counts=$(python3 - "$log" "$out/not-passed" "$out/why-not-passed" <<'PY'
import json, sys
ok = bad = 0
for line in open(sys.argv[1]):
    line = line.strip()
    if not line:
        continue
    r = json.loads(line)
    # A skipped test is not a passed test.
    if r.get("result") == "OK":
        ok += 1
    else:
        bad += 1
        print("  not passed: %s (%s)" % (r.get("name"), r.get("result")), file=sys.stderr)
        with open(sys.argv[2], "a") as f:
            print("not passed: %s (%s)" % (r.get("name"), r.get("result")), file=f)
        # why, next to the summary: the test's lines that say FAIL (with
        # the 4 lines before them, where a failed command printed its
        # error, and the 3 after, the context its fail() prints) or a
        # kernel panic, else the end of its output
        lines = (r.get("stdout") or "").splitlines()
        why = [i for i, l in enumerate(lines)
               if "FAIL" in l or "panic" in l.lower() or "timed out" in l]
        keep = sorted({j for i in why for j in range(max(i - 4, 0), min(i + 4, len(lines)))})
        excerpt = [lines[j] for j in keep][:60] or lines[-20:]
        with open(sys.argv[3], "a") as f:
            print("== why %s failed (excerpt of its output):" % r.get("name"), file=f)
            for l in excerpt:
                print("   " + l[:300], file=f)
print(ok, bad)
PY
)
    passed=$((passed + ${counts% *}))
    failed=$((failed + ${counts#* }))
}

# check NAME COMMAND...: one pass/fail line for a step that is not a meson test.
check() {
    local name=$1; shift
    if "$@"; then
        echo "check passed: $name"; passed=$((passed + 1))
    else
        echo "check FAILED: $name"; not_passed "$name"
    fi
}

# fuzz_pair FUZZER FUZZER: both at once for $fuzz_seconds, then one check
# line each, with its output
fuzz_pair() {
    local f pids=()
    for f in "$@"; do
        bash tests/fuzz/run-fuzz.sh "$out/fuzz" "$fuzz_seconds" "$f" > "$out/fuzz-$f.out" 2>&1 &
        pids+=($!)
    done
    for f in "$@"; do
        check "fuzzing $f for ${fuzz_seconds}s" fuzz_result "${pids[0]}" "$out/fuzz-$f.out"
        pids=("${pids[@]:1}")
    done
}
fuzz_result() { local rc=0; wait "$1" || rc=$?; cat "$2"; return $rc; }

# clean_debs SUITE NAME OUTDIR: the packages built in a clean SUITE root,
# with that distribution's lintian (--pedantic; errors, warnings and info
# tags not overridden, with their reason, in debian/*.lintian-overrides,
# fail) and autopkgtest; one check line each, and one for compiler warnings
# in the build log. Fails when no packages were built.
clean_debs() {
    local suite=$1 name=$2 dir=$3 rc=0
    DEB_BUILD_OPTIONS="parallel=2" bash tools/build-debs-clean.sh --lintian --autopkgtest \
        "$suite" "$dir" "$out/clean-roots" || rc=$?
    if [ "$rc" != 0 ] && [ "$rc" != 3 ]; then
        echo "check FAILED: $name packages build in a clean root (log: $dir/build.log)"
        not_passed "$name packages build in a clean root"
        return 1
    fi
    echo "check passed: $name packages build in a clean root (apt-get build-dep, dpkg-buildpackage, unit suite inside)"
    passed=$((passed + 1))
    check "$name lintian clean (errors, warnings, info)" grep -qx passed "$dir/lintian.status"
    check "$name autopkgtest (debian/tests) passes" grep -qx passed "$dir/autopkgtest.status"
    check "$name package build without compiler warnings" \
        bash -c '! grep -E "^[^ ]+:[0-9]+:[0-9]+: warning:" "$1"' _ "$dir/build.log"
}

step "build (warnings are errors)"
if meson setup "$out/build" -Dsandbox_tests=true && ninja -C "$out/build"; then
    # The compat suite's Debian 13 root (mmdebstrap from the archive, then
    # virt-rdma built inside it) is made while the packages build: much of
    # it waits on the archive, and no sandbox runs yet (CI time). Its test
    # (debian13-root) finds it made and checks it; a failure here is that
    # test's failure, with the log.
    compat_root_start=$SECONDS
    VRM_SOURCE_DIR=$top VRM_BUILD_DIR=$out/build LC_ALL=C.UTF-8 \
        bash tests/compat/compat-test.sh 13 root > "$out/compat-root.log" 2>&1 &
    compat_root_pid=$!
    # Before the suites: the packages, built as a distribution's buildd
    # builds them (tools/build-debs-clean.sh: a clean buildd root made with
    # mmdebstrap, apt-get build-dep from debian/control alone,
    # dpkg-buildpackage with the unit suite), checked by that
    # distribution's lintian and autopkgtest. The stock-host e2e scenario
    # installs the Debian 12 ones inside the sandbox ($out/build/debs).
    step "Debian packages from clean Debian 12 and 13 roots: build, lintian, autopkgtest"
    pkg_start=$SECONDS
    clean_debs bookworm "Debian 12" "$out/build/debs" &&
        check "packages hold what they should; libvirtrdma-dev builds a program" \
            bash tests/packaging/deb-check.sh "$out/build/debs"
    check "the negative twin: a clean Debian 12 build without libgnutls28-dev fails" \
        bash tests/packaging/clean-build-negative.sh bookworm "$out/clean-roots"
    clean_debs trixie "Debian 13" "$out/debs-13"
    echo "packages, lintian and autopkgtest: $((SECONDS - pkg_start)) s"
    wait "$compat_root_pid"
    echo "the Debian 13 root, beside the packages: status $?, $((SECONDS - compat_root_start)) s"
    step "unit, rdma and e2e suites"
    meson test -C "$out/build" --print-errorlogs --num-processes 2 --no-suite compat
    count_meson "$out/build"
    step "compat suite: Debian 13 sandbox hosts"
    compat_start=$SECONDS
    meson test -C "$out/build" --print-errorlogs --suite compat
    count_meson "$out/build"
    echo "compat suite: $((SECONDS - compat_start)) s"
    step "translation template"
    check "po template builds" ninja -C "$out/build" virt-rdma-pot
else
    echo "run-all.sh: the build failed"
    not_passed "the build"
fi

step "unit suite under AddressSanitizer and UndefinedBehaviorSanitizer"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
if meson setup "$out/asan" -Dsandbox_tests=false -Db_sanitize=address,undefined -Db_lundef=false &&
   ninja -C "$out/asan"; then
    meson test -C "$out/asan" --suite unit --print-errorlogs
    count_meson "$out/asan"
else
    echo "run-all.sh: the sanitizer build failed"
    not_passed "the sanitizer build"
fi

if [ -f tests/fuzz/run-fuzz.sh ]; then
    step "fuzzing (${fuzz_seconds}s each, libFuzzer with ASan+UBSan)"
    if CC=clang meson setup "$out/fuzz" -Dsandbox_tests=false -Dfuzzing=true \
           -Db_sanitize=address,undefined -Db_lundef=false &&
       ninja -C "$out/fuzz"; then
        # every seed and regression input once, then the fuzzers two at a
        # time (each is one process; the machine has two cores), each for
        # the whole time
        meson test -C "$out/fuzz" --suite fuzz --print-errorlogs
        count_meson "$out/fuzz"
        fuzz_pair vrmxmlfuzz vrmwirefuzz
        fuzz_pair vrmchannelfuzz vrmstatsfuzz
        fuzz_pair vrmpeerfuzz vrmcontrolfuzz
    else
        echo "run-all.sh: the fuzzing build failed"
        not_passed "the fuzzing build"
    fi
fi

echo
# what failed, next to the summary (a CI page shows only the end of the log)
[ -s "$out/why-not-passed" ] && cat "$out/why-not-passed"
[ -s "$out/not-passed" ] && cat "$out/not-passed"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
