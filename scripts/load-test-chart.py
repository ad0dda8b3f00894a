#!/usr/bin/env python3
"""The load test's report and chart, from what scripts/load-test left in its output folder.

Reads: <step>.time (/usr/bin/time -v), <step>.json (matcher's --format json reports), runs.tsv
(matcher_runs), rows.tsv, histogram.tsv, matches-by-run.tsv. Prints a text report and writes
load-test.svg (phase timings per step, matches per filter). Python's standard library only.
"""
import argparse
import html
import json
import os

STEPS = [("migrate", "migrate"), ("seed", "seed world"), ("run1", "run day 1"),
         ("changes", "seed changes"), ("run2", "run day 2")]
PHASE_COLOURS = {"read": "#4e79a7", "evaluate": "#f28e2b", "write": "#59a14f", "other": "#bab0ac",
                 "seed": "#76b7b2", "migrate": "#9c755f"}


def read_time(path):
    """Wall seconds, peak RSS (KiB) and CPU share from /usr/bin/time -v output."""
    wall = rss = cpu = None
    if not os.path.exists(path):
        return wall, rss, cpu
    for line in open(path, encoding="utf-8", errors="replace"):
        line = line.strip()
        if line.startswith("Maximum resident set size"):
            rss = int(line.rsplit(":", 1)[1])
        elif line.startswith("Elapsed (wall clock) time"):
            parts = line.rsplit(": ", 1)[1].split(":")
            wall = sum(float(p) * 60 ** i for i, p in enumerate(reversed(parts)))
        elif line.startswith("Percent of CPU"):
            cpu = line.rsplit(":", 1)[1].strip()
    return wall, rss, cpu


def read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read().strip()
        return json.loads(text) if text else {}
    except (OSError, ValueError):
        return {}


def read_tsv(path):
    if not os.path.exists(path):
        return []
    return [line.rstrip("\n").split("\t") for line in open(path, encoding="utf-8") if line.strip()]


def fmt_seconds(value):
    return "-" if value is None else f"{value:.2f}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--title", default="matcher load test")
    args = parser.parse_args()
    d = args.dir

    steps = []
    for key, label in STEPS:
        wall, rss, cpu = read_time(os.path.join(d, key + ".time"))
        steps.append({"key": key, "label": label, "wall": wall, "rss": rss, "cpu": cpu,
                      "report": read_json(os.path.join(d, key + ".json"))})
    runs = read_tsv(os.path.join(d, "runs.tsv"))
    rows = read_tsv(os.path.join(d, "rows.tsv"))
    histogram = [(label, int(count)) for label, count in read_tsv(os.path.join(d, "histogram.tsv"))]
    by_run = read_tsv(os.path.join(d, "matches-by-run.tsv"))

    out = [args.title, ""]
    out.append("Steps                 wall s   peak RSS MiB   CPU")
    for s in steps:
        rss = "-" if s["rss"] is None else f"{s['rss'] / 1024:.0f}"
        out.append(f"  {s['label']:<18} {fmt_seconds(s['wall']):>8}   {rss:>12}   {s['cpu'] or '-'}")

    out += ["", "Seeds (matcher seed --format json)"]
    for s in steps:
        if s["key"] in ("seed", "changes") and s["report"]:
            r = s["report"]
            written = ", ".join(f"{k} {v}" for k, v in r.get("rows", {}).items())
            out.append(f"  {s['label']:<14} {r.get('time', {}).get('total', 0):.2f} s: {written}")

    out += ["", "Runs (phase seconds from matcher_runs.phase_seconds; the run's own --format json report)"]
    for r in runs:
        (run_id, kind, status, clock, candidates, evaluated, invalid, paid, matches, notifications,
         phases, seconds) = (r + [""] * 12)[:12]
        try:
            phase_map = json.loads(phases) if phases else {}
        except ValueError:
            phase_map = {}
        order = ["read", "evaluate", "write"]
        names = sorted(phase_map, key=lambda k: (order.index(k) if k in order else len(order), k))
        phase_text = "  ".join(f"{k} {float(phase_map[k]):.2f}" for k in names)
        out.append(f"  run #{run_id} {kind} {status} clock {clock}: {phase_text}  total {seconds} s")
        out.append(f"      candidates {candidates}, filters evaluated {evaluated}, invalid {invalid}, "
                   f"paid-ignored {paid}, matches {matches}, notifications {notifications}")
    for s in steps:
        if s["key"] in ("run1", "run2") and s["report"].get("time"):
            t = s["report"]["time"]
            order = ["read", "evaluate", "write", "forget", "total"]  # the JSON's keys are sorted
            names = sorted(t, key=lambda k: (order.index(k) if k in order else len(order), k))
            out.append(f"  {s['label']} report: " + "  ".join(f"{k} {t[k]:.2f}" for k in names))

    out += ["", "Rows"]
    for name, count in rows:
        out.append(f"  {name:<26} {int(count):>12,}")
    if by_run:
        out.append("  matches by run: " + ", ".join(f"run {r[0]}: {int(r[1]):,} ({int(r[2]):,} filters)" for r in by_run))

    out += ["", "Matches per live filter (both runs; at most 100 a filter and run)"]
    top = max([c for _, c in histogram] + [1])
    total = sum(c for _, c in histogram) or 1
    for label, count in histogram:
        bar = "#" * round(50 * count / top)
        out.append(f"  {label:>8} | {bar:<50} {count:>9,} ({100 * count / total:5.1f} %)")

    svg_path = os.path.join(d, "load-test.svg")
    with open(svg_path, "w", encoding="utf-8") as f:
        f.write(svg(args.title, steps, runs, histogram))
    out += ["", f"Chart: {svg_path}"]
    print("\n".join(out))


def svg(title, steps, runs, histogram):
    width, left, right = 900, 140, 40
    parts = []

    def text(x, y, s, size=12, anchor="start", weight="normal", colour="#222"):
        parts.append(f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
                     f'font-weight="{weight}" fill="{colour}">{html.escape(str(s))}</text>')

    def rect(x, y, w, h, colour, tip):
        parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" height="{h:.1f}" fill="{colour}">'
                     f'<title>{html.escape(tip)}</title></rect>')

    text(width / 2, 28, title, 15, "middle", "bold")

    # Panel 1: seconds per step, runs split into their phases.
    run_phases = {}
    for r in runs:
        try:
            run_phases[len(run_phases)] = json.loads(r[10]) if len(r) > 10 and r[10] else {}
        except ValueError:
            run_phases[len(run_phases)] = {}
    bars = []
    run_index = 0
    for s in steps:
        wall = s["wall"] or 0
        if s["key"] in ("run1", "run2"):
            phases = dict(run_phases.get(run_index, {}))
            run_index += 1
            order = ["read", "evaluate", "write"]
            segments = sorted(((k, float(v)) for k, v in phases.items()),
                              key=lambda kv: (order.index(kv[0]) if kv[0] in order else len(order), kv[0]))
            other = wall - sum(v for _, v in segments)
            if other > 0.01:
                segments.append(("other", other))
        else:
            segments = [("migrate" if s["key"] == "migrate" else "seed", wall)]
        bars.append((s["label"], segments, wall))
    longest = max([b[2] for b in bars] + [sum(v for _, v in b[1]) for b in bars] + [0.001])
    scale = (width - left - right - 60) / longest
    y = 60
    text(left, y - 8, "Seconds per step (runs split into phases)", 13, weight="bold")
    for label, segments, wall in bars:
        text(left - 8, y + 15, label, 12, "end")
        x = left
        for name, seconds in segments:
            rect(x, y, seconds * scale, 22, PHASE_COLOURS.get(name, "#e15759"), f"{label}: {name} {seconds:.2f} s")
            x += seconds * scale
        text(x + 6, y + 15, f"{max(wall, sum(v for _, v in segments)):.1f} s", 11)
        y += 30
    # Legend.
    x = left
    for name in ("read", "evaluate", "write", "other", "seed", "migrate"):
        rect(x, y + 4, 12, 12, PHASE_COLOURS[name], name)
        text(x + 16, y + 14, name, 11)
        x += 90
    y += 50

    # Panel 2: matches per live filter.
    text(left, y, "Live filters by matches over both runs", 13, weight="bold")
    y += 12
    chart_h = 220
    top = max([c for _, c in histogram] + [1])
    n = max(len(histogram), 1)
    slot = (width - left - right) / n
    base = y + chart_h
    for i, (label, count) in enumerate(histogram):
        h = chart_h * count / top
        x = left + i * slot + slot * 0.15
        rect(x, base - h, slot * 0.7, h, "#4e79a7", f"{label} matches: {count} filters")
        text(x + slot * 0.35, base - h - 4, f"{count:,}", 10, "middle")
        text(x + slot * 0.35, base + 14, label, 11, "middle")
    parts.append(f'<line x1="{left}" y1="{base}" x2="{width - right}" y2="{base}" stroke="#444"/>')
    text(left - 8, base - chart_h / 2, "filters", 11, "end")
    text(left + (width - left - right) / 2, base + 32, "matches per filter", 11, "middle")
    height = base + 50
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height:.0f}" '
            f'viewBox="0 0 {width} {height:.0f}" font-family="sans-serif">'
            f'<rect width="100%" height="100%" fill="white"/>' + "".join(parts) + "</svg>\n")


if __name__ == "__main__":
    main()
