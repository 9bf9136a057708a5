#!/bin/bash
# Tail-loss probes per recovery timer expiry, A/B: two rxectl binaries,
# alternating per run (A first in odd rounds, B first in even ones), ROUNDS
# rounds of WRITE, READ and SEND at 64 KiB on loopback (selective repeat,
# the default), 2 s each, "loaded" (three CPU-bound shell loops beside the
# run, so the ends stall without losing anything) and "drop1" (--drop 0.01
# --seed 11, both directions). Each run holds flock /tmp/gorxe-bench.lock.
#
# usage: docs/loss/probe-ab.sh ROUNDS RXECTL_A RXECTL_B
# output: one line per run: round A|B condition op MiB/s, then
# rto_expiries, rto_spurious, tail_probes, ib_timeouts, retransmits and
# sr_packets_resent of the client
set -u
R=$1 A=$2 B=$3
burn() { for _ in 1 2 3; do timeout "$1" sh -c 'while :; do :; done' & done; }
for r in $(seq "$R"); do
	if [ $((r % 2)) = 1 ]; then order="A B"; else order="B A"; fi
	for cond in loaded drop1; do
		for op in write read send; do
			for b in $order; do
				bin=$A; [ "$b" = B ] && bin=$B
				extra=""; [ "$cond" = drop1 ] && extra="--drop 0.01 --seed 11"
				load=""; [ "$cond" = loaded ] && load=1
				out=$(flock /tmp/gorxe-bench.lock bash -c "$(declare -f burn); [ -n '$load' ] && burn 3; \
					'$bin' $op-bw --loopback --udp-port 0 -s 65536 -D 2 $extra --json 2>/dev/null; wait")
				echo "$out" | python3 -c "
import json, sys
try:
    d = json.load(sys.stdin); t = d['transport']
    print('$r $b $cond $op', round(d['results'][0]['bw_average']), 'rto', t['rto_expiries'], 'spur', t['rto_spurious'], 'probes', t['tail_probes'], 'ib', t['ib_timeouts'], 'resent', t['retransmits'], t['sr_packets_resent'])
except Exception as e:
    print('$r $b $cond $op failed', e)"
			done
		done
	done
done
