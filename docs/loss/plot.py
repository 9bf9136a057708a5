"""Draws goodput against loss from the JSON lines of docs/loss/sweep.sh
as an SVG: one panel per operation and direction of loss, one line per
size and selective-repeat mode (solid: on, dashed: off), goodput as a
ratio to the loss-free run of the same mode.

Repeated sweeps may be concatenated: each point is the median goodput of
its repeats over the median of the loss-free runs. Runs of a PAIRED=1
sweep carry a "pair" number: each lossy run is then divided by its own
loss-free base (the run just before it), and the point is the median of
those ratios, as docs/loss/table.py reads them. Grey dotted lines mark
issue 13's selective-repeat targets (0.9, 0.8, 0.75, 0.6 at 0.1, 1, 2,
5 %).

usage: cat runs*.jsonl | python3 docs/loss/plot.py > docs/loss/goodput.svg"""
import json
import statistics
import sys
from collections import defaultdict

runs = [json.loads(l) for l in sys.stdin if l.strip().startswith("{")]
groups = defaultdict(list)
for r in runs:
    if not r.get("failed"):
        groups[(r["op"], r["size"], r["mode"], r["p"], r.get("dir"))].append(r["bw"])
bw = {k: statistics.median(v) for k, v in groups.items()}
base = {(op, size, mode): v for (op, size, mode, p, _), v in bw.items() if p == 0}
# ratio[(op, size, mode, p, dir)]: the median of the paired ratios, where
# the runs are paired (a failed run or base leaves its pair out).
# Each lossy run's base is the run of its pair number just before it:
# every sweep numbers its pairs from 1 again, so concatenated sweeps
# repeat the numbers.
last = {}
paired = defaultdict(list)
for r in runs:
    if "pair" not in r:
        continue
    if r.get("dir") == "base":
        last[r["pair"]] = r
        continue
    b = last.pop(r["pair"], None)
    if b is not None and not b.get("failed") and not r.get("failed") and b["bw"] > 0:
        paired[(r["op"], r["size"], r["mode"], r["p"], r.get("dir"))].append(r["bw"] / b["bw"])
ratio = {k: statistics.median(v) for k, v in paired.items()}
for k, v in bw.items():
    b = base.get(k[:3])
    if k not in ratio and k[3] > 0 and b:
        ratio[k] = v / b
targets = {0.001: 0.9, 0.01: 0.8, 0.02: 0.75, 0.05: 0.6}
ps = [0] + sorted({r["p"] for r in runs if r["p"] > 0})
ops = [o for o in ("write", "read", "send") if any(r["op"] == o for r in runs)]
dirs = [d for d in ("req", "resp") if any(r.get("dir") == d for r in runs)]
W, H, M = 300, 200, 40  # panel size and margin
colors = {65536: "#1f77b4", 1048576: "#d62728"}
out = []
width, height = max(M + len(dirs) * (W + M), M + 4 * 150), M + len(ops) * (H + M) + 30
out.append(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">')
out.append(f'<rect width="{width}" height="{height}" fill="white"/>')
for i, op in enumerate(ops):
    for j, d in enumerate(dirs):
        x0, y0 = M + j * (W + M), M + i * (H + M)
        title = f"{op.upper()}, loss on {'requests' if d == 'req' else 'responses'}"
        out.append(f'<text x="{x0 + W / 2}" y="{y0 - 8}" text-anchor="middle" font-weight="bold">{title}</text>')
        out.append(f'<rect x="{x0}" y="{y0}" width="{W}" height="{H}" fill="none" stroke="black"/>')

        def px(k):
            return x0 + W * k / (len(ps) - 1)

        def py(v):
            return y0 + H - H * min(v, 1.2) / 1.2

        for v in (0.25, 0.5, 0.75, 1.0):
            out.append(f'<line x1="{x0}" y1="{py(v):.1f}" x2="{x0 + W}" y2="{py(v):.1f}" stroke="#ddd"/>')
            out.append(f'<text x="{x0 - 4}" y="{py(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
        for k, p in enumerate(ps):
            out.append(f'<text x="{px(k):.1f}" y="{y0 + H + 14}" text-anchor="middle">{p:.1%}</text>')
            if p in targets:
                out.append(f'<line x1="{px(k) - 8:.1f}" y1="{py(targets[p]):.1f}" x2="{px(k) + 8:.1f}" y2="{py(targets[p]):.1f}" stroke="#888" stroke-width="2" stroke-dasharray="2,2"/>')
        for size in sorted({r["size"] for r in runs}):
            for mode in ("on", "off"):
                pts = [(px(0), py(1.0))]
                for k, p in enumerate(ps[1:], 1):
                    v = ratio.get((op, size, mode, p, d))
                    if v is None:
                        continue
                    pts.append((px(k), py(v)))
                if len(pts) == 1:
                    continue
                dash = "" if mode == "on" else ' stroke-dasharray="5,3"'
                path = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
                out.append(f'<polyline points="{path}" fill="none" stroke="{colors.get(size, "black")}" stroke-width="2"{dash}/>')
ly = height - 14
legend = [("64 KiB, SR on", colors[65536], ""), ("64 KiB, SR off", colors[65536], ' stroke-dasharray="5,3"'),
          ("1 MiB, SR on", colors[1048576], ""), ("1 MiB, SR off", colors[1048576], ' stroke-dasharray="5,3"')]
for n, (label, c, dash) in enumerate(legend):
    lx = M + n * 150
    out.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 30}" y2="{ly}" stroke="{c}" stroke-width="2"{dash}/>')
    out.append(f'<text x="{lx + 36}" y="{ly + 4}">{label}</text>')
out.append(f'<text x="{M}" y="14">Goodput / loss-free goodput of the same mode against --drop p (loopback, gorxe to gorxe)</text>')
out.append("</svg>")
print("\n".join(out))
