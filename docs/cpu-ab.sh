#!/bin/sh
# CPU time and throughput of rxectl's loopback perftest runs, built from
# several commits, in alternating rounds (order reversed in even rounds),
# each run under the bench lock. From the repository root:
#   docs/cpu-ab.sh ROUNDS "OPS" SIZE A=COMMIT B=COMMIT ...
#   e.g. docs/cpu-ab.sh 4 "write read send" 65536 A=a418baa B=HEAD
# Each run is `rxectl OP-bw --loopback -s SIZE -D 3` under /usr/bin/time;
# cpu-µs/op is (user + system time of the whole process, both devices)
# divided by the iterations it reports; steal% is the processor time the
# hypervisor took from this VM during the run (docs/steal.sh): runs with a
# large one measured a different machine. Raw lines go to $OUT (default
# /tmp/cpu-ab.txt), then medians per variant and operation.
set -eu
ROUNDS=${1:?usage: $0 ROUNDS "OPS" SIZE A=COMMIT ...}
OPS=$2 SIZE=$3
shift 3
OUT=${OUT:-/tmp/cpu-ab.txt}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
. docs/ablib.sh
ab_build "$W" rxectl "$@"
: >"$OUT"
r=1
while [ "$r" -le "$ROUNDS" ]; do
	for op in $OPS; do
		for v in $(ab_order "$r" $ab_variants); do
			flock /tmp/gorxe-bench.lock docs/steal.sh sh -c '/usr/bin/time -f "TIME %U %S" "$@" 2>&1' \
				sh "$W/rxectl-$v" "$op-bw" --loopback -s "$SIZE" -D 3 >"$W/one"
			it=$(grep -A1 '#bytes' "$W/one" | tail -1 | awk 'NF >= 4 && $2 > 0 {print $2, $4}')
			t=$(grep TIME "$W/one" | awk '{print $2 + $3, $NF}')
			if [ -z "$it" ] || [ -z "$t" ]; then
				echo "r$r $v $op: no result (output in $OUT.r$r-$v-$op)" >&2
				cp "$W/one" "$OUT.r$r-$v-$op"
				continue
			fi
			echo "r$r $v $op $it $t" | awk '{printf "%s %s %s %s %.1f %s\n", $1, $2, $3, $5, $6 * 1e6 / $4, $7}' >>"$OUT"
		done
	done
	r=$((r + 1))
done
python3 - "$OUT" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    _, v, op, mibs, cpu, steal = line.split()
    rows.setdefault((op, v), []).append((float(mibs), float(cpu), float(steal)))
print("op     variant  MiB/s (median; runs)   cpu-µs/op (median; runs)   steal% (runs)")
for (op, v), xs in sorted(rows.items()):
    m = [x[0] for x in xs]; c = [x[1] for x in xs]; s = [x[2] for x in xs]
    print(f"{op:6} {v:7}  {statistics.median(m):5.0f}; {', '.join(f'{x:.0f}' for x in m)}   "
          f"{statistics.median(c):5.1f}; {', '.join(f'{x:.1f}' for x in c)}   {', '.join(f'{x:.0f}' for x in s)}")
PY
