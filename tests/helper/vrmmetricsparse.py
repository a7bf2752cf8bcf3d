#!/usr/bin/python3
"""vrmmetricsparse.py FILE: parse a Prometheus text file with the real
parser (python3-prometheus-client) and print what it read, one line each,
for vrmhelpermetricstest to compare:

    family NAME TYPE HELP-HEX
    sample NAME [LABEL=VALUE-HEX ...] VALUE

Label values and help are hex-encoded UTF-8 (so that the C side need not
unescape anything), labels sorted by name, VALUE an integer.
"""
import sys

from prometheus_client.parser import text_string_to_metric_families


def main():
    with open(sys.argv[1], encoding="utf-8") as fh:
        text = fh.read()
    for family in text_string_to_metric_families(text):
        print("family %s %s %s" % (family.name, family.type,
                                   family.documentation.encode().hex()))
        for s in family.samples:
            labels = "".join(" %s=%s" % (k, v.encode().hex())
                             for k, v in sorted(s.labels.items()))
            if s.value != int(s.value):
                sys.exit("%s: value %r is not an integer" % (s.name, s.value))
            print("sample %s%s %d" % (s.name, labels, int(s.value)))


if __name__ == "__main__":
    main()
