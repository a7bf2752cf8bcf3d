#!/bin/bash
# check-translation.sh SOURCE_DIR [BUILD_DIR]: every language in po/LINGUAS
# is a complete, current translation, and the built programs speak it.
#
#   - the template, made here with xgettext from po/POTFILES.in (the same
#     keywords as po/meson.build's 'glib' preset), has no message cut short
#     by a format macro (G_GUINT64_FORMAT, PRIu64...: xgettext ends the
#     message at "%1$", so it can never be translated);
#   - msgfmt --check passes on each po/LL.po and counts no fuzzy or
#     untranslated message;
#   - each po/LL.po translates every message of the template (msgcmp) and
#     holds none that the sources no longer have;
#   - with BUILD_DIR: the built `virt-rdma --help` and a usage error are
#     German under LANGUAGE=de, read from the build tree's catalogs
#     (VRM_LOCALEDIR), and no longer English.
set -uo pipefail

src=$1 build=${2:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
# show CMP_OUTPUT: msgcmp's complaints, each with the msgid it means
show() {
    local f n what
    while IFS= read -r what; do
        echo "    $what"
        if [[ $what =~ ^(.*):([0-9]+):\ this\ message ]]; then
            f=${BASH_REMATCH[1]} n=${BASH_REMATCH[2]}
            # msgcmp names the msgstr line: the msgid above it
            awk -v n="$n" 'NR <= n && /^msgid / { m = NR } END { print m }' "$f" |
                { read -r m; sed -n "${m},$((n - 1))p" "$f"; } | head -4 | sed 's/^/        /'
        fi
    done < <(grep -v 'warning: this message is not used' "$1" | head -40)
}

xgettext --directory="$src" --files-from="$src/po/POTFILES.in" \
    --output="$tmp/template.pot" --package-name=virt-rdma \
    --from-code=UTF-8 --add-comments=TRANSLATORS: \
    --keyword=_ --keyword=N_ --keyword=C_:1c,2 --keyword=NC_:1c,2 \
    --keyword=g_dcgettext:2 --keyword=g_dngettext:2,3 --keyword=g_dpgettext2:2c,3 \
    --flag=N_:1:pass-c-format --flag=C_:2:pass-c-format \
    --flag=NC_:2:pass-c-format --flag=g_dngettext:2:pass-c-format \
    2> "$tmp/xgettext.log" ||
    { cat "$tmp/xgettext.log"; echo "FAIL: xgettext"; exit 1; }
[ -s "$tmp/template.pot" ] || { echo "FAIL: xgettext found no messages"; exit 1; }

if grep -nE '%[0-9]+\$"$' "$tmp/template.pot" > "$tmp/cut"; then
    bad "messages cut short at a positional directive (a format macro inside the string?):"
    sed 's/^/    /' "$tmp/cut"
fi
total=$(msgattrib --no-obsolete "$tmp/template.pot" 2>/dev/null | grep -c '^msgid ')
total=$((total - 1))    # the header

langs=$(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$src/po/LINGUAS" | grep -v '^$')
[ -n "$langs" ] || echo "note: po/LINGUAS lists no language"
for l in $langs; do
    po=$src/po/$l.po
    [ -f "$po" ] || { bad "po/LINGUAS lists $l but po/$l.po does not exist"; continue; }
    if ! stats=$(msgfmt --check --statistics -o "$tmp/$l.mo" "$po" 2>&1); then
        bad "msgfmt --check po/$l.po:"; echo "$stats" | sed 's/^/    /'; continue
    fi
    echo "$l: $stats"
    case $stats in
        *fuzzy*|*untranslated*) bad "po/$l.po has fuzzy or untranslated messages: $stats" ;;
    esac
    # every message of the template translated (fuzzy and empty ones count as missing)
    msgcmp "$po" "$tmp/template.pot" > "$tmp/cmp" 2>&1 ||
        { bad "po/$l.po lacks messages of the current sources (regenerate with msgmerge):"
          show "$tmp/cmp"; }
    # and nothing the sources no longer have
    msgcmp --use-untranslated "$tmp/template.pot" "$po" > "$tmp/cmp" 2>&1 ||
        { bad "po/$l.po holds messages the sources no longer have:"
          show "$tmp/cmp"; }
    n=$(msgattrib --translated --no-fuzzy --no-obsolete "$po" 2>/dev/null | grep -c '^msgid ')
    n=$((n - 1))
    [ "$n" = "$total" ] || bad "po/$l.po translates $n messages, the sources have $total"
done

run_de() {
    # (the suppressions only matter in a sanitizer build: see the file)
    LSAN_OPTIONS=${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$src/tests/i18n/lsan-locpath.supp \
        VRM_LOCALEDIR="$build/po" LANGUAGE=de LC_ALL=$loc LOCPATH=${locpath:-} "$@"
}
if [ -n "$build" ] && [ $fail = 0 ] && grep -qx de <<<"$langs"; then
    # A German locale where one can be had: glibc 2.41 (Debian 13) ignores
    # LANGUAGE in C.UTF-8 as in C; glibc 2.36 (Debian 12) honours it there.
    locpath=
    loc=$(locale -a 2>/dev/null | grep -ixE 'de_DE\.utf-?8' | head -1)
    if [ -z "$loc" ] && localedef -i de_DE -f UTF-8 "$tmp/de_DE.UTF-8" > /dev/null 2>&1; then
        loc=de_DE.UTF-8 locpath=$tmp
    fi
    [ -n "$loc" ] || loc=$(locale -a 2>/dev/null | grep -ixE 'c\.utf-?8' | head -1)
    cli=$build/tools/cli/virt-rdma
    if [ -z "$loc" ]; then
        echo "SKIP: no C.UTF-8 locale and localedef cannot make de_DE.UTF-8 (install locales)"
        [ $fail = 0 ] && exit 77
    elif [ ! -f "$build/po/de/LC_MESSAGES/virt-rdma.mo" ]; then
        bad "the build did not make $build/po/de/LC_MESSAGES/virt-rdma.mo"
    else
        out=$(run_de "$cli" --help 2>&1)
        head -3 <<<"$out" | sed 's/^/de: /'
        grep -qF 'Live-Migration von libvirt/QEMU-Gästen über RDMA.' <<<"$out" ||
            bad "virt-rdma --help under LANGUAGE=de lacks its German summary"
        grep -qF 'Live migration of libvirt/QEMU guests over RDMA.' <<<"$out" &&
            bad "virt-rdma --help under LANGUAGE=de is still English"
        grep -qF 'Aufruf: virt-rdma BEFEHL [OPTIONEN]' <<<"$out" ||
            bad "virt-rdma --help under LANGUAGE=de lacks its German usage line"
        # a message with positional arguments, through the error path (exit 2)
        out=$(run_de "$cli" migrate --bandwidth -3 web1 qemu:///system 2>&1); rc=$?
        echo "de: $out"
        [ $rc = 2 ] || bad "virt-rdma migrate --bandwidth -3 exited $rc, not 2"
        grep -qF 'virt-rdma: Fehler: --bandwidth erwartet eine positive Anzahl MiB/s, nicht -3' <<<"$out" ||
            bad "the usage error under LANGUAGE=de is not the German one"
        # and English stays English
        out=$(VRM_LOCALEDIR="$build/po" LANGUAGE= LC_ALL=C "$cli" --help 2>&1)
        grep -qF 'Live migration of libvirt/QEMU guests over RDMA.' <<<"$out" ||
            bad "virt-rdma --help in the C locale is not English"
    fi
fi

[ $fail = 0 ] && echo "ok: po/LINGUAS ($(echo $langs)) complete for $total messages"
exit $fail
