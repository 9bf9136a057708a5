#!/bin/bash
# usage: docs/loss/read1m-req-ab.sh FROM TO, with the two builds at /tmp/rxectl.A and /tmp/rxectl.B.
# READ 1 MiB with 0.1 % loss on the requests, selective repeat on, one run per
# seed FROM..TO for each build, the order swapped from seed to seed; prints
# "BUILD SEED" and docs/loss/run.py's line per run (lost packets, retransmits,
# read_resent: the READ responses the server sent again).
cd "$(dirname "$0")/../.."
for s in $(seq "$1" "$2"); do
	if [ $((s % 2)) = 0 ]; then order="A B"; else order="B A"; fi
	for b in $order; do
		/tmp/rxectl.$b read-bw --loopback -s 1048576 -D 2 --drop 0.001,dir=send --seed "$s" --selective-repeat on --json 2>/dev/null |
			python3 docs/loss/run.py read 1048576 0.001 req on | sed "s/^/$b $s /"
	done
done
