#!/usr/bin/env python3
"""Checks that every PromQL expression in the alert rules and the Grafana dashboard names
only metrics the job exports (deploy/prometheus/metrics.txt, itself checked against a file
the job writes by Tests/MatcherTests). Usage: check-metric-names.py METRICS_TXT ALERTS_YML DASHBOARD_JSON"""
import json
import re
import sys

import yaml

KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
            "group_left", "group_right", "inf", "nan", "atan2"}


def metric_names(expr):
    """The metric names an expression selects."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)                     # strings
    e = re.sub(r"\{[^}]*\}", "", e)                                    # label matchers
    e = re.sub(r"\[[^\]]*\]", "", e)                                   # ranges
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", e)
    e = re.sub(r"\$\{?\w+\}?", "", e)                                  # Grafana variables
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        word, rest = m.group(0), e[m.end():].lstrip()
        if rest.startswith("(") or word.lower() in KEYWORDS:
            continue
        if re.fullmatch(r"\d+[smhdwy]", word):
            continue
        names.add(word)
    return names


def main(listing, alerts, dashboard):
    exported = {l.strip() for l in open(listing) if l.strip() and not l.startswith("#")}
    problems, count = [], 0
    for group in yaml.safe_load(open(alerts))["groups"]:
        for rule in group["rules"]:
            count += 1
            for name in metric_names(str(rule["expr"])) - exported:
                problems.append("alert %s: %s is not exported" % (rule.get("alert"), name))
    board = json.load(open(dashboard))
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            count += 1
            for name in metric_names(target["expr"]) - exported:
                problems.append("panel %r: %s is not exported" % (panel["title"], name))
    for var in board.get("templating", {}).get("list", []):
        q = var.get("query", "")
        m = re.fullmatch(r"label_values\((.*),\s*\w+\)", q)
        if m:
            count += 1
            for name in metric_names(m.group(1)) - exported:
                problems.append("variable %s: %s is not exported" % (var["name"], name))
    if count == 0:
        problems.append("no expressions found")
    print("\n".join(problems) if problems else "%d expressions name only exported metrics" % count)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
