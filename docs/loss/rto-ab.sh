#!/bin/bash
# Recovery timer expiries with and without loss: two rxectl binaries A and
# B, alternating per run (A first in odd rounds, B first in even ones),
# ROUNDS rounds of WRITE, READ and SEND at 64 KiB on loopback, 2 s each,
# in three conditions: "clean" (the machine as it is), "loaded" (plus three
# CPU-bound shell loops for the run) and "drop1" (plus --drop 0.01 --seed
# 11). Each run holds flock /tmp/gorxe-bench.lock.
#
# usage: docs/loss/rto-ab.sh ROUNDS RXECTL_A RXECTL_B
# output: one line per run: round A|B condition op MiB/s rto_expiries
# ib_timeouts retransmits
set -u
R=$1 A=$2 B=$3
burn() { # three CPU-bound loops for $1 seconds
	for _ in 1 2 3; do timeout "$1" sh -c 'while :; do :; done' & done
}
for r in $(seq "$R"); do
	if [ $((r % 2)) = 1 ]; then order="A B"; else order="B A"; fi
	for cond in clean loaded drop1; do
		for op in write read send; do
			for b in $order; do
				bin=$A
				[ "$b" = B ] && bin=$B
				extra=""
				[ "$cond" = drop1 ] && extra="--drop 0.01 --seed 11"
				load=""
				[ "$cond" = loaded ] && load=1
				# shellcheck disable=SC2086
				out=$(flock /tmp/gorxe-bench.lock bash -c "$(declare -f burn); [ -n '$load' ] && burn 3; \
					'$bin' $op-bw --loopback --udp-port 0 -s 65536 -D 2 $extra --json 2>/dev/null; wait")
				echo "$out" | python3 -c "
import json, sys
try:
    d = json.load(sys.stdin); t = d['transport']
    print('$r $b $cond $op', round(d['results'][0]['bw_average']), t['rto_expiries'], t['ib_timeouts'], t['retransmits'])
except Exception:
    print('$r $b $cond $op failed')"
			done
		done
	done
done
