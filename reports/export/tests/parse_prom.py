#!/usr/bin/env python3
"""Reads a Prometheus text-format file with python3-prometheus-client's parsers and prints what they
read, as JSON, for prometheus_test.cpp.

  parse_prom.py FILE

1. prometheus_client.parser (the text format 0.0.4, what node_exporter's textfile collector reads):
   every family, its type and help, every sample's name, labels, value and timestamp.
2. prometheus_client.openmetrics.parser on the same text plus "# EOF": stricter about grouping (a
   family split in two groups is an error there, "Clashing name"), so it checks that each family is
   one group.
Exits 1 with "FAIL: ..." when either parser rejects the file.
"""
import json
import math
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families


def value(v):
    return v if math.isfinite(v) else str(v)


def main():
    text = open(sys.argv[1], encoding="utf-8").read()
    try:
        families = [{"name": f.name, "type": f.type, "help": f.documentation,
                     "samples": [{"name": s.name, "labels": s.labels, "value": value(s.value),
                                  "timestamp": None if s.timestamp is None else str(s.timestamp)}
                                 for s in f.samples]}
                    for f in text_string_to_metric_families(text)]
    except Exception as e:  # the parser raises ValueError and others on bad input
        print(f"FAIL: prometheus_client.parser rejects the file: {e!r}")
        return 1
    try:
        om = sum(len(f.samples) for f in openmetrics_families(text + "# EOF\n"))
    except Exception as e:
        print(f"FAIL: prometheus_client.openmetrics.parser rejects the file: {e!r}")
        return 1
    json.dump({"families": families, "openmetrics_samples": om}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
