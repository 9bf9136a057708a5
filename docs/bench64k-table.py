"""Medians of the 64 KiB benchmark lines that docs/bench64k-ab.sh and
docs/skipwork.sh collect ("rROUND VARIANT Benchmark... metrics [steal% N]"),
per benchmark and variant, with each round's gso-ratio, raw GSO+GRO rate
and the share of the run the hypervisor stole (docs/steal.sh).
Usage: python3 docs/bench64k-table.py RAWFILE"""
import re
import statistics
import sys

rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    v, name = f[1], f[2].split('/')[0].removeprefix('Benchmark')
    m = dict((k, float(x)) for x, k in re.findall(r'([\d.]+) (MB/s|cpu-µs/op|gso-ratio|gsoUDP-MB/s|ratio)\b', line))
    st = re.search(r'steal% (\d+)', line)  # docs/steal.sh; absent in older files
    m['steal'] = st and int(st.group(1))
    rows.setdefault((name, v), []).append(m)
print('bench variant  MB/s  cpu-µs/op  gso-ratio  ratio-to-sendmmsg  [medians];  '
      'per round: gso-ratio (raw GSO+GRO MB/s, steal % of the run)')
for (name, v), ms in sorted(rows.items()):
    def med(k):
        return statistics.median(m[k] for m in ms)
    print(f"{name:12} {v:4} {med('MB/s'):7.0f} {med('cpu-µs/op'):6.1f} {med('gso-ratio'):.3f} {med('ratio'):.2f};  "
          + ', '.join('%.3f (%.0f%s)' % (m['gso-ratio'], m['gsoUDP-MB/s'],
                                          '' if m['steal'] is None else ', %d %%' % m['steal']) for m in ms))
