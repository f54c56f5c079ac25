#!/usr/bin/env python3
"""Checks share/dsperf/grafana/dsperf-dashboard.json against what `dsreport export --openmetrics` writes.

    check_dashboard.py DASHBOARD SCHEMA ALERT_RULES EXPORT.prom OUTDIR

- The dashboard is valid JSON and matches SCHEMA (grafana-dashboard.schema.json: the part of Grafana's
  dashboard model it relies on; there is no official schema to validate against).
- What a schema cannot say: panel ids unique, panels inside the 24-column grid and not overlapping,
  every $variable a query uses defined in templating.
- Every metric name in a panel query, a variable query and an expression of ALERT_RULES is one that
  EXPORT.prom (a real export of fixture runs) has a family for, and every family of EXPORT.prom is on
  the dashboard.
- It writes OUTDIR/panels.rules.yml and OUTDIR/panels.test.yml: for promtool, one alerting rule
  absent(<query>) per panel query (variables set to "All"), and a unit test that feeds EXPORT.prom's
  series and expects none of them to fire, i.e. every panel query is valid PromQL and returns data on
  a real export. monitoring_test.sh runs it.

Exit 0 when all holds, 1 with one line per problem otherwise. Needs jsonschema and yaml (Debian
python3-jsonschema, python3-yaml).
"""
import json
import re
import sys

import jsonschema
import yaml

# Grafana's own variables a query may use.
GRAFANA_BUILTINS = {"__interval": "5m", "__rate_interval": "5m", "__range": "1d", "__interval_ms": "300000",
                    "__range_s": "86400"}
PROMQL_WORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
                "offset", "bool", "atan2", "inf", "nan", "start", "end"}
VAR_REF = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)(?::\w+)?\]\]")


def metric_names(expr):
    """The metric names a PromQL expression selects: identifiers outside strings, label matchers,
    ranges and grouping clauses that are not functions, operators or numbers."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"(?P<num>(?<![\w:])\d[\w.]*(?:[eE][+-]?\d+)?)|(?P<id>[a-zA-Z_:][a-zA-Z0-9_:]*)", e):
        tok = m.group("id")
        if not tok or tok.lower() in PROMQL_WORDS:
            continue
        if e[m.end():].lstrip().startswith("("):
            continue  # a function or an aggregation
        names.add(tok)
    return names


def uses_vars(text):
    return {next(g for g in m.groups() if g) for m in VAR_REF.finditer(text)}


def substitute(expr, variables):
    """The query as Grafana sends it with every variable at "All" (its allValue)."""
    def one(m):
        name = next(g for g in m.groups() if g)
        return variables.get(name, GRAFANA_BUILTINS.get(name, ".*"))  # an unknown one is reported apart
    return VAR_REF.sub(one, expr)


def exported_families(prom):
    fams, series = [], []
    for line in open(prom, encoding="utf-8"):
        line = line.rstrip("\n")
        m = re.match(r"# TYPE (\S+) (\w+)$", line)
        if m:
            fams.append(m.group(1))
        elif line and not line.startswith("#"):
            sel, _, value = line.rpartition(" ")
            series.append((sel, value))
    return fams, series


def main(argv):
    if len(argv) != 6:
        print(__doc__, file=sys.stderr)
        return 2
    dash_path, schema_path, rules_path, prom_path, outdir = argv[1:]
    problems = []
    try:
        with open(dash_path, encoding="utf-8") as f:
            dash = json.load(f)
    except json.JSONDecodeError as e:
        print(f"{dash_path}: not valid JSON: {e}")
        return 1
    with open(schema_path, encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    for err in sorted(jsonschema.Draft202012Validator(schema).iter_errors(dash), key=lambda e: list(e.path)):
        problems.append(f"schema: at /{'/'.join(map(str, err.path))}: {err.message}")
    if problems:  # the checks below assume the structure the schema describes
        print("\n".join(problems))
        return 1

    variables = {}
    for v in dash["templating"]["list"]:
        if v["name"] in variables:
            problems.append(f"variable {v['name']} defined twice")
        variables[v["name"]] = v.get("allValue") or ""
    ids, cells, queries = set(), {}, []  # queries: (where, expr)
    for p in dash["panels"]:
        where = f"panel {p['id']} '{p['title']}'"
        if p["id"] in ids:
            problems.append(f"{where}: id {p['id']} used twice")
        ids.add(p["id"])
        g = p["gridPos"]
        if g["x"] + g["w"] > 24:
            problems.append(f"{where}: gridPos x + w = {g['x'] + g['w']} is past the 24 columns")
        for x in range(g["x"], min(g["x"] + g["w"], 24)):
            for y in range(g["y"], g["y"] + g["h"]):
                if (x, y) in cells:
                    problems.append(f"{where}: overlaps {cells[(x, y)]} at column {x}, row {y}")
                    break
                cells[(x, y)] = where
            else:
                continue
            break
        for t in p.get("targets", []):
            queries.append((f"{where} query {t['refId']}", t["expr"]))
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            m = re.fullmatch(r"label_values\((.*),\s*\w+\)", v["query"])
            queries.append((f"variable {v['name']}", m.group(1)))

    fams, series = exported_families(prom_path)
    if not fams:
        problems.append(f"{prom_path}: no metric family (# TYPE line) in the export")
    on_dashboard = set()
    for where, expr in queries:
        for name in sorted(uses_vars(expr)):
            if name not in variables and name not in GRAFANA_BUILTINS:
                problems.append(f"{where}: uses ${name}, which templating does not define")
        names = metric_names(expr)
        if not names and not where.startswith("variable"):
            problems.append(f"{where}: selects no metric: {expr!r}")
        for name in sorted(names - set(fams)):
            problems.append(f"{where}: metric {name} is not written by dsreport export ({', '.join(fams)})")
        on_dashboard |= names
    for fam in fams:
        if fam not in on_dashboard:
            problems.append(f"dashboard: no panel shows {fam}, which dsreport export writes")

    with open(rules_path, encoding="utf-8") as f:
        rules = yaml.safe_load(f)
    for group in rules["groups"]:
        for r in group["rules"]:
            for name in sorted(metric_names(r["expr"]) - set(fams)):
                problems.append(f"{rules_path}: {r.get('alert') or r.get('record')}: metric {name} is not "
                                f"written by dsreport export")

    # Every panel query, variables at "All", must be valid PromQL and return data on the real export.
    panel_rules, expect = [], []
    for i, (where, expr) in enumerate(q for q in queries if not q[0].startswith("variable")):
        name = f"panel_query_{i}"
        panel_rules.append({"alert": name, "expr": f"absent(\n{substitute(expr, variables)}\n)",
                            "annotations": {"summary": f"{where} returns no data on the fixture export"}})
        expect.append({"eval_time": "10m", "alertname": name, "exp_alerts": []})
    with open(f"{outdir}/panels.rules.yml", "w", encoding="utf-8") as f:
        json.dump({"groups": [{"name": "dashboard-panels", "rules": panel_rules}]}, f, indent=1)
    input_series = [{"series": sel, "values": f"{value}x20"} for sel, value in series
                     if value not in ("NaN", "+Inf", "-Inf")]
    with open(f"{outdir}/panels.test.yml", "w", encoding="utf-8") as f:
        json.dump({"rule_files": ["panels.rules.yml"], "evaluation_interval": "1m",
                   "tests": [{"interval": "1m", "input_series": input_series, "alert_rule_test": expect}]},
                  f, indent=1)

    print("\n".join(problems) if problems else
          f"{dash_path}: {len(ids)} panels, {len(queries)} queries; metrics all among the {len(fams)} "
          f"families of the export, every family on the dashboard")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
