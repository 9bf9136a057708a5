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
trap 'rm -rf "$W"' EXIT
. docs/ablib.sh
ab_build "$W" rxe.test "$@"
: >"$OUT"
r=1
while [ "$r" -le "$ROUNDS" ]; do
	for v in $(ab_order "$r" $ab_variants); do
		ab_bench64k "$r" "$v" "$W/rxe.test-$v" >>"$OUT"
	done
	r=$((r + 1))
done
python3 docs/bench64k-table.py "$OUT"
