#!/usr/bin/env python3
"""Efficiency against ranks, as an SVG, from gcomp-sim --json output (standard library only).

    scripts/sim_plot.py OUT.svg LABEL=FILE.jsonl [LABEL=FILE.jsonl ...] [--title TEXT]

Each FILE holds gcomp-sim's JSON lines (one object per node count). Per series it draws
the simulated `efficiency` (solid, with markers) and gcomp-plan's `plan_efficiency` for the
same figures (dashed, same colour) where the file has it. Ranks go on a log2 axis.
"""
import json
import math
import sys

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
W, H = 720, 440
LEFT, RIGHT, TOP, BOTTOM = 70, 190, 50, 60


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    if not rows:
        sys.exit(f"sim_plot: no JSON lines in {path}")
    return sorted(rows, key=lambda r: r["ranks"])


def main(argv):
    title = "Scaling efficiency under gcomp-sim"
    series = []
    args = list(argv[1:])
    if "--title" in args:
        i = args.index("--title")
        title = args[i + 1]
        del args[i:i + 2]
    if len(args) < 2 or any("=" not in a for a in args[1:]):
        sys.exit(__doc__)
    out = args[0]
    for spec in args[1:]:
        label, path = spec.split("=", 1)
        series.append((label, load(path)))

    ranks = [r["ranks"] for _, rows in series for r in rows]
    xmin, xmax = math.log2(min(ranks)), math.log2(max(ranks))
    if xmax == xmin:
        xmax = xmin + 1
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def x(n):
        return LEFT + (math.log2(n) - xmin) / (xmax - xmin) * pw

    def y(e):
        return TOP + (1 - e) * ph

    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{LEFT + pw / 2}" y="24" text-anchor="middle" font-size="15">{title}</text>']
    for k in range(0, 11):   # horizontal grid every 10%
        e = k / 10
        svg.append(f'<line x1="{LEFT}" y1="{y(e):.1f}" x2="{LEFT + pw}" y2="{y(e):.1f}" '
                   f'stroke="#ddd"/>')
        svg.append(f'<text x="{LEFT - 8}" y="{y(e) + 4:.1f}" text-anchor="end">{k * 10}%</text>')
    for n in sorted(set(ranks)):
        svg.append(f'<line x1="{x(n):.1f}" y1="{TOP}" x2="{x(n):.1f}" y2="{TOP + ph}" '
                   f'stroke="#eee"/>')
        svg.append(f'<text x="{x(n):.1f}" y="{TOP + ph + 18}" text-anchor="middle">{n}</text>')
    svg.append(f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" '
               f'stroke="black"/>')
    svg.append(f'<text x="{LEFT + pw / 2}" y="{H - 16}" text-anchor="middle">ranks '
               f'(simulated; log scale)</text>')
    svg.append(f'<text x="18" y="{TOP + ph / 2}" text-anchor="middle" '
               f'transform="rotate(-90 18 {TOP + ph / 2})">step efficiency</text>')

    ly = TOP + 10
    for i, (label, rows) in enumerate(series):
        c = COLOURS[i % len(COLOURS)]
        sim = [(r["ranks"], r["efficiency"]) for r in rows if r.get("efficiency") is not None]
        plan = [(r["ranks"], r["plan_efficiency"]) for r in rows
                if r.get("plan_efficiency") is not None]
        if sim:
            pts = " ".join(f"{x(n):.1f},{y(e):.1f}" for n, e in sim)
            svg.append(f'<polyline points="{pts}" fill="none" stroke="{c}" stroke-width="2"/>')
            for n, e in sim:
                svg.append(f'<circle cx="{x(n):.1f}" cy="{y(e):.1f}" r="3.5" fill="{c}">'
                           f'<title>{label}, {n} ranks: {e * 100:.1f}%</title></circle>')
        if plan:
            pts = " ".join(f"{x(n):.1f},{y(e):.1f}" for n, e in plan)
            svg.append(f'<polyline points="{pts}" fill="none" stroke="{c}" stroke-width="1.2" '
                       f'stroke-dasharray="5,4"/>')
        lx = LEFT + pw + 14
        svg.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 24}" y2="{ly}" stroke="{c}" '
                   f'stroke-width="2"/>')
        svg.append(f'<text x="{lx + 30}" y="{ly + 4}">{label}</text>')
        ly += 18
        if plan:
            svg.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 24}" y2="{ly}" stroke="{c}" '
                       f'stroke-width="1.2" stroke-dasharray="5,4"/>')
            svg.append(f'<text x="{lx + 30}" y="{ly + 4}">{label}, gcomp-plan</text>')
            ly += 18
        ly += 6
    svg.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main(sys.argv)
