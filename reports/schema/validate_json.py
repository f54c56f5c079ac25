#!/usr/bin/env python3
"""Validates dsperf result files against dsperf.schema.json (JSON Schema draft 2020-12).

Usage: validate_json.py FILE... (JSON documents, or .jsonl journals validated line by line).
Exit code: 0 all valid, 1 a file is invalid (each problem printed with its path), 2 bad usage or
python3-jsonschema missing.
"""
import json
import os
import sys

try:
    import jsonschema
except ImportError:
    print("validate_json.py: python3-jsonschema is not installed (apt-get install python3-jsonschema)", file=sys.stderr)
    sys.exit(2)

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dsperf.schema.json")


def validator_for(schema, ref):
    sub = dict(schema)
    sub.pop("oneOf", None)
    sub["$ref"] = ref
    return jsonschema.Draft202012Validator(sub)


def main(paths):
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    with open(SCHEMA) as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    whole = jsonschema.Draft202012Validator(schema)
    lines = {"dsperf.sweep.journal": validator_for(schema, "#/$defs/sweepJournalLine"),
             "dsperf.train.journal": validator_for(schema, "#/$defs/trainJournalLine")}
    bad = 0
    for path in paths:
        docs = []
        if path.endswith(".jsonl"):
            kind = None
            with open(path) as f:
                for n, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    doc = json.loads(line)
                    kind = doc.get("schema", kind)
                    if kind not in lines:
                        print(f"{path} line {n}: not a dsperf journal line (schema {kind!r})")
                        bad += 1
                        break
                    docs.append((f"{path} line {n}", lines[kind], doc))
        else:
            with open(path) as f:
                docs.append((path, whole, json.load(f)))
        for where, v, doc in docs:
            errors = sorted(v.iter_errors(doc), key=lambda e: list(e.absolute_path))
            for e in errors[:10]:
                loc = "/".join(str(p) for p in e.absolute_path) or "(document)"
                print(f"{where}: {loc}: {e.message[:300]}")
            bad += 1 if errors else 0
    if bad == 0:
        print(f"validate_json.py: {len(paths)} file(s) valid against {SCHEMA}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
