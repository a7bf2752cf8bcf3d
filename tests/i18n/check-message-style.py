#!/usr/bin/env python3
"""check-message-style.py SOURCE_DIR: the translatable messages follow
libvirt's message style. Exits 1 naming file:line and the message of each
one that does not.

The messages are the template's: xgettext over po/POTFILES.in with the
keywords of tests/i18n/check-translation.sh (po/meson.build's 'glib' preset).

The rule applied (issue 18):

  - A message (error, warning, log line, CLI error, option help) starts
    with a lower-case letter and does not end with a period: libvirt's
    "cannot open directory '%1$s'", not "Cannot open directory '%1$s'.".
    Several sentences are joined with ';' or ':'. Leading and trailing
    white space (newlines) is ignored; an ellipsis ("...") is no period.

  - It may start with a capital when its first word is an acronym, a proper
    noun or an identifier, written as it must be: a word of two or more
    capitals, digits or '_' (RDMA, QEMU, UUID, TLS, ERROR, WRITE_WITH_IMM,
    and the option placeholders of --help such as N, URI, DOMAIN: a single
    capital counts when it is the whole message), optionally with "'s"
    (QEMU's), or a word of ALLOWED below (IPv4, MiB...). Program, option
    and function names (virt-rdmad, --channels, ibv_reg_mr, libvirt) start
    in lower case anyway.

  - Exempt, and kept as they are (they follow other conventions):
      * GLib's help paragraphs: the parameter string, summary and
        description of a GOptionContext (g_option_context_new,
        g_option_context_set_summary, g_option_context_set_description on
        the message's line or the three lines above it); GLib capitalises
        them and ends them with periods ("Live migration of libvirt/QEMU
        guests over RDMA." is a help summary);
      * text between the markers
            /* message-style: exempt-begin: REASON */
            /* message-style: exempt-end */
        in a source file: usage texts printed by hand, virsh's job labels
        and job type names (vrmclijobfmt.c: identical to virsh's, its own
        translations' msgids, a fixture test compares them), column
        headers and the `virt-rdma caps` report, whose lines read like
        virsh's own output ("Label:   value"; a test compares them).
    A message is exempt only when every place that uses it is.
"""
import os
import re
import subprocess
import sys
import tempfile

# first words that are spelled with a capital and are not an all-capitals
# acronym: add a word here only when it is a proper noun, a unit or an
# identifier written that way
ALLOWED = {"IPv4", "IPv6", "KiB", "MiB", "GiB", "TiB", "Mbit/s", "InfiniBand",
           "RoCE", "GLib", "Linux"}

ACRONYM = re.compile(r"^[A-Z][A-Z0-9_]+(?:'s)?$")
FIRST_WORD = re.compile(r"^[^\s:;,()\[\]<>'\"]+")
GOPTION_HELP = re.compile(r"g_option_context_(new|set_summary|set_description)\s*\(")
BEGIN = "message-style: exempt-begin"
END = "message-style: exempt-end"

XGETTEXT = [
    "xgettext", "--package-name=virt-rdma",
    "--from-code=UTF-8", "--add-comments=TRANSLATORS:",
    "--keyword=_", "--keyword=N_", "--keyword=C_:1c,2", "--keyword=NC_:1c,2",
    "--keyword=g_dcgettext:2", "--keyword=g_dngettext:2,3",
    "--keyword=g_dpgettext2:2c,3",
    "--flag=N_:1:pass-c-format", "--flag=C_:2:pass-c-format",
    "--flag=NC_:2:pass-c-format", "--flag=g_dngettext:2:pass-c-format",
]


def unquote(s):
    """The value of a PO string literal (without its quotes)."""
    out = []
    i = 0
    esc = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "r": "\r"}
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            out.append(esc.get(s[i + 1], s[i + 1]))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def read_template(path):
    """[(msgid or msgid_plural, [(file, line)])], the header left out."""
    entries = []
    with open(path, encoding="utf-8") as fh:
        blocks = fh.read().split("\n\n")
    for block in blocks:
        places = []
        texts = {}
        cur = None
        for line in block.split("\n"):
            if line.startswith("#:"):
                for ref in line[2:].split():
                    f, _, n = ref.rpartition(":")
                    places.append((f, int(n)))
            elif line.startswith("#") or not line.strip():
                continue
            elif line.startswith('"'):
                if cur:
                    texts[cur] += unquote(line[1:-1])
            else:
                key, _, rest = line.partition(" ")
                cur = key if key in ("msgid", "msgid_plural") else None
                if cur:
                    texts[cur] = unquote(rest.strip()[1:-1])
        for key in ("msgid", "msgid_plural"):
            if texts.get(key) and places:
                entries.append((texts[key], places))
    return entries


class Sources:
    """Whether a place in a source file is exempt from the style."""

    def __init__(self, src):
        self.src = src
        self.files = {}
        self.problems = []

    def lines(self, f):
        if f not in self.files:
            with open(os.path.join(self.src, f), encoding="utf-8",
                      errors="replace") as fh:
                lines = fh.read().split("\n")
            inside = [False] * (len(lines) + 2)
            on = 0
            for i, text in enumerate(lines, 1):
                if BEGIN in text:
                    if on:
                        self.problems.append("%s:%d: an exempt region begins inside another (from line %d)" % (f, i, on))
                    on = i
                if on:
                    inside[i] = True
                if END in text:
                    if not on:
                        self.problems.append("%s:%d: an exempt region ends that did not begin" % (f, i))
                    on = 0
            if on:
                self.problems.append("%s:%d: an exempt region does not end" % (f, on))
            self.files[f] = (lines, inside)
        return self.files[f]

    def exempt(self, f, n):
        lines, inside = self.lines(f)
        if inside[n]:
            return True
        window = "\n".join(lines[max(0, n - 4):n])
        return bool(GOPTION_HELP.search(window))


def problem(msg):
    why = []
    text = msg.strip()
    if not text:
        return ""
    if text[0].isupper():
        first = FIRST_WORD.match(text)
        word = first.group(0) if first else text[0]
        if word.endswith("'s"):
            bare = word[:-2]
        else:
            bare = word
        if not (ACRONYM.match(word) or bare in ALLOWED or
                (len(text) == 1 and text.isupper())):
            why.append("starts with a capital letter")
    if text.endswith(".") and not text.endswith("..."):
        why.append("ends with a period")
    return " and ".join(why)


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    src = argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        pot = os.path.join(tmp, "template.pot")
        r = subprocess.run(XGETTEXT + ["--directory=" + src,
                                       "--files-from=" + os.path.join(src, "po", "POTFILES.in"),
                                       "--output=" + pot],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True)
        if r.returncode != 0 or not os.path.isfile(pot):
            print(r.stdout)
            print("message-style: xgettext failed")
            return 1
        entries = read_template(pot)
    sources = Sources(src)
    found = []
    bad = set()
    checked = exempt = 0
    for msg, places in entries:
        if places and all(sources.exempt(f, n) for f, n in places):
            exempt += 1
            continue
        checked += 1
        why = problem(msg)
        if why:
            bad.add(msg)
            for f, n in places:
                if not sources.exempt(f, n):
                    found.append("%s:%d: %s: %r" % (f, n, why, msg))
    for line in sorted(found) + sources.problems:
        print("message-style: " + line)
    if found:
        print("message-style: %d messages break libvirt's message style "
              "(lower-case start, no final period: see %s)"
              % (len(bad), os.path.basename(__file__)))
    if found or sources.problems:
        return 1
    if checked == 0:
        print("message-style: no message found")
        return 1
    print("message-style: %d messages in libvirt's style, %d exempt"
          % (checked, exempt))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
