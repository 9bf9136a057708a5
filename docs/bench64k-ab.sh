#!/bin/sh
# In-process 64 KiB WRITE/READ/SEND benchmarks (rxe's (Write|Read|Send)64K/udp,
# each with its own raw GSO+GRO and sendmmsg baselines) of two commits, in
# alternating rounds (order reversed in even rounds), under the bench lock,
# then medians per benchmark and variant. From the repository root:
#   docs/bench64k-ab.sh ROUNDS A=COMMIT B=COMMIT
# Raw lines go to $OUT (default /tmp/bench64k-ab.txt).
set -eu
ROUNDS=${1:?usage: $0 ROUNDS A=COMMIT B=COMMIT}
shift
OUT=${OUT:-/tmp/bench64k-ab.txt}
W=$(mktemp -d)
vs=""
for vc in "$@"; do
	v=${vc%%=*} c=${vc#*=}
	mkdir -p "$W/src-$v"
	git archive "$c" | tar -x -C "$W/src-$v"
	(cd "$W/src-$v" && go test -c -o "$W/rxe-$v.test" ./rxe)
	vs="$vs $v"
done
rev=$(for v in $vs; do echo "$v"; done | tac | tr '\n' ' ')
: >"$OUT"
r=1
while [ "$r" -le "$ROUNDS" ]; do
	order=$vs
	[ $((r % 2)) -eq 0 ] && order=$rev
	for v in $order; do
		flock /tmp/gorxe-bench.lock docs/steal.sh "$W/rxe-$v.test" -test.run '^$' \
			-test.bench '(Write|Read|Send)64K/udp' -test.benchtime 2s |
			grep '^Benchmark' | sed "s/^/r$r $v /" >>"$OUT"
	done
	r=$((r + 1))
done
python3 docs/bench64k-table.py "$OUT"
rm -rf "$W"
