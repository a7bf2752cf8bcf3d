#!/usr/bin/python3
# stream-digests.py SOURCE_LOG DESTINATION_LOG: compare the chunk digests a
# source engine logged as it sent QEMU's stream ("chunk sent") with those
# the destination engine logged as it handed the stream to QEMU ("chunk
# delivered"), both at debug level (virt-rdmad --engine-debug). Exit 0 when
# every chunk is there, at the same stream offset, with the same length and
# digest, on every channel; 1 (naming the first differences) otherwise.
import re
import sys

PAT = re.compile(r"channel (\d+): chunk (sent|delivered) offset (\d+) "
                 r"length (\d+) digest ([0-9a-f]+)")


def load(path, what):
    chunks = {}
    with open(path, errors="replace") as f:
        for line in f:
            m = PAT.search(line)
            if m and m.group(2) == what:
                chunks[(int(m.group(1)), int(m.group(3)))] = (int(m.group(4)), m.group(5))
    return chunks


def main():
    sent = load(sys.argv[1], "sent")
    delivered = load(sys.argv[2], "delivered")
    if not sent:
        print("no chunk digests in %s (engines not at debug level?)" % sys.argv[1])
        return 1
    differ = sorted(k for k in sent if k in delivered and sent[k] != delivered[k])
    missing = sorted(set(sent) - set(delivered))
    extra = sorted(set(delivered) - set(sent))
    total = sum(length for length, _ in sent.values())
    channels = len({ch for ch, _ in sent})
    if not differ and not missing and not extra:
        print("stream digests: %d chunks, %d bytes on %d channel(s), equal on both hosts"
              % (len(sent), total, channels))
        return 0
    print("stream digests: %d chunks sent, %d delivered: %d differ, %d missing, %d unexpected"
          % (len(sent), len(delivered), len(differ), len(missing), len(extra)))
    for ch, off in differ[:10]:
        print("  channel %d offset %d: sent %s, delivered %s"
              % (ch, off, sent[(ch, off)], delivered[(ch, off)]))
    for ch, off in missing[:5]:
        print("  channel %d offset %d: sent, never delivered" % (ch, off))
    for ch, off in extra[:5]:
        print("  channel %d offset %d: delivered, never sent" % (ch, off))
    return 1


if __name__ == "__main__":
    sys.exit(main())
