#!/bin/sh
# Loss-free A/B (issue 13 target "loss-free throughput within 3 % of
# today's"): loopback WRITE, READ and SEND at 64 KiB and 1 MiB without
# faults, alternating binary A (e.g. main's rxectl) and binary B (this
# branch's, selective repeat negotiated) within each round, ROUNDS rounds
# of DURATION seconds each, under flock /tmp/gorxe-bench.lock. Prints one
# line per op and size: the median MiB/s of A and of B and the ratio B/A.
#
# usage: docs/loss/lossfree-ab.sh RXECTL_A RXECTL_B [ROUNDS] [DURATION]
set -eu
exec flock /tmp/gorxe-bench.lock sh -eu -c '
A=$1 B=$2 ROUNDS=$3 DUR=$4
out=$(mktemp)
for r in $(seq "$ROUNDS"); do
	for op in write read send; do
		for size in 65536 1048576; do
			for bin in A B; do
				eval "x=\$$bin"
				bw=$("$x" "$op-bw" --loopback --udp-port 0 -s "$size" -D "$DUR" --json 2>/dev/null |
					python3 -c "import json,sys; print(json.load(sys.stdin)[\"results\"][0][\"bw_average\"])") || bw=nan
				echo "$op $size $bin $bw" >> "$out"
			done
		done
	done
done
python3 - "$out" <<PY
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    op, size, b, bw = line.split()
    rows.setdefault((op, int(size)), {}).setdefault(b, []).append(float(bw))
print("| op | size | A MiB/s | B MiB/s | B/A | rounds |")
print("|---|---|---|---|---|---|")
for (op, size), v in sorted(rows.items()):
    a, b, n = statistics.median(v["A"]), statistics.median(v["B"]), len(v["A"])
    print(f"| {op.upper()} | {size // 1024} KiB | {a:.0f} | {b:.0f} | {b / a:.2f} | {n} |")
PY
rm -f "$out"
' sh "$1" "$2" "${3:-3}" "${4:-2}"
