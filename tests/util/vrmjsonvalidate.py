#!/usr/bin/env python3
"""vrmjsonvalidate.py: virt-rdma's JSON output against its JSON Schema.

    vrmjsonvalidate.py SCHEMA KIND FILE

KIND is one of the schema's $defs (capabilities, jobinfo, jobs, event).
Each non-empty line of FILE must be one JSON object that is valid as KIND.
Exit 0 with "ok: N objects", or 1 naming the line and what is wrong.
Run with Debian's python3 (python3-jsonschema, Draft 2020-12).
"""
import json
import sys

import jsonschema


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: vrmjsonvalidate.py SCHEMA KIND FILE")
    schema_path, kind, path = sys.argv[1:]
    with open(schema_path, encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    if kind not in schema["$defs"]:
        sys.exit("vrmjsonvalidate: the schema has no $defs/%s" % kind)
    validator = jsonschema.Draft202012Validator(
        dict(schema, **{"$ref": "#/$defs/" + kind}),
        format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    count = 0
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as e:
                sys.exit("line %d is not JSON (%s): %s" % (number, e, line))
            errors = sorted(validator.iter_errors(obj), key=str)
            if errors:
                sys.exit("line %d is not a valid %s: %s at %s\n%s" % (
                    number, kind, errors[0].message,
                    "/".join(str(p) for p in errors[0].absolute_path) or "the top",
                    line))
            count += 1
    if count == 0:
        sys.exit("vrmjsonvalidate: %s holds no JSON object" % path)
    print("ok: %d objects" % count)


if __name__ == "__main__":
    main()
