#!/usr/bin/env python3
"""Share of perf samples by leaf symbol and by symbols on the stack.

Reads `perf script -F comm,tid,ip,sym` output on standard input, leaves out
the samples whose stack holds any of the --drop substrings (e.g. the raw
baselines' goroutines of a ratio benchmark), and prints the top leaf
symbols and, for each --has substring, the share of the kept samples whose
stack holds it. Used by docs/performance.md ("Issue 14 and the capped
buffers on 7ffb1ce"):

  perf record -g -o /tmp/perf-w64g.data -- /tmp/rxe.test -test.run '^$' \\
      -test.bench 'Write64K/udp' -test.benchtime 3s
  perf script -i /tmp/perf-w64g.data -F comm,tid,ip,sym | python3 docs/perfstacks.py \\
      --drop rawudp.Measure --drop benchGSORound \\
      --has runtime.memmove --has _copy_from_iter --has _copy_to_iter \\
      --has foldAVX512 --has runtime.park_m --has do_epoll_wait \\
      --has schedule_hrtimeout_range_clock
"""
import argparse
import collections
import sys


def stacks(lines):
    cur = None
    for line in lines:
        if not line.strip():
            if cur is not None:
                yield cur
            cur = None
        elif line[0] not in " \t":
            cur = []  # a sample's header line: comm tid
        elif cur is not None:
            parts = line.split(None, 1)
            cur.append(parts[1].strip() if len(parts) > 1 else "?")
    if cur is not None:
        yield cur


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--drop", action="append", default=[])
    ap.add_argument("--has", action="append", default=[])
    ap.add_argument("--top", type=int, default=20)
    a = ap.parse_args()
    total, kept = 0, []
    for s in stacks(sys.stdin):
        total += 1
        if not any(d in f for d in a.drop for f in s):
            kept.append(s)
    if not kept:
        sys.exit("no samples kept")
    n = len(kept)
    print(f"samples {total}, kept {n}")
    leaves = collections.Counter(s[0] if s else "?" for s in kept)
    for sym, c in leaves.most_common(a.top):
        print(f"{100 * c / n:6.2f} %  leaf {sym}")
    for h in a.has:
        c = sum(1 for s in kept if any(h in f for f in s))
        print(f"{100 * c / n:6.2f} %  stack holds {h}")


if __name__ == "__main__":
    main()
