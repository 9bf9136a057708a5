"""Ratios of docs/loss/paired-ab.sh's output: for each build, each lossy
run's MiB/s over the loss-free run just before it, their median, and the
median share of held requests placed on arrival (ooo_placed / ooo_held).

usage: python3 docs/loss/pairtab.py FILE
"""
import collections
import statistics
import sys

rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
base = {}
ratios = collections.defaultdict(list)
placed = collections.defaultdict(list)
for label, p, bw, held, pl in rows:
    if float(p) == 0:
        base[label] = float(bw)
        continue
    ratios[label].append(float(bw) / base[label])
    placed[label].append(int(pl) / max(int(held), 1))
for k in ratios:
    print(k, "ratios", " ".join("%.2f" % x for x in ratios[k]),
          "median %.2f" % statistics.median(ratios[k]),
          "placed/held median %.2f" % statistics.median(placed[k]))
