#!/usr/bin/python3
# plaintext-count.py: read a packet capture (pcap, from tcpdump -w -) on
# stdin until EOF; print how many bytes it held and how often the e2e
# guest's known plaintext occurs in it.
#
# The guest (tests/e2e/guest/vrmguest.c) begins every static page with
# {page number, MAGIC, H(p), H(p), ...} in 32-bit little-endian words:
# "GRMV" followed by the same four bytes twice. A clear-text migration of
# a 128 MiB guest carries some 30000 of them; ciphertext matches those 12
# bytes (8 of them fixed, 4 repeated) by chance about once per 2^64
# positions, i.e. never.
import re
import sys

PATTERN = re.compile(rb"GRMV(.{4})\1", re.S)
KEEP = 11       # one byte less than a match: a match is never counted twice

total = matches = 0
tail = b""
src = sys.stdin.buffer
while True:
    chunk = src.read(1 << 16)
    if not chunk:
        break
    total += len(chunk)
    buf = tail + chunk
    matches += sum(1 for m in PATTERN.finditer(buf) if m.end() > len(tail))
    tail = buf[-KEEP:]
print("captured %d bytes, guest plaintext found %d times" % (total, matches))
