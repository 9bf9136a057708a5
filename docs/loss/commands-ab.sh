#!/bin/bash
# Loss-free (and one lossy) A/B of two rxectl builds over seven loopback
# commands: RC READ/WRITE/SEND at 64 KiB, SEND over an SRQ with two QPs, UD
# SEND with one and two QPs, and SEND 1 MiB with 1 % loss on requests. Each
# round runs every command with both builds, the order swapped from round
# to round. Prints round|command|build|MiB/s (bw_average of --json, summed
# over the QPs); the ratios in docs/performance.md are medians of the
# per-round ratios B/A.
#
# usage: docs/loss/commands-ab.sh ROUNDS RXECTL_A RXECTL_B
R=$1 A=$2 B=$3
cfgs=(
	"read-bw --loopback -s 65536 -n 20000"
	"write-bw --loopback -s 65536 -n 20000"
	"send-bw --loopback -s 65536 -n 20000"
	"send-bw --loopback -s 65536 -n 20000 --use-srq -q 2"
	"send-bw -c UD --loopback -s 4096 -n 200000"
	"send-bw -c UD --loopback -s 4096 -n 100000 -q 2"
	"send-bw --loopback -s 1048576 -D 2 --drop 1%,dir=send --seed 11"
)
for r in $(seq 1 "$R"); do
	if [ $((r % 2)) = 1 ]; then order="$A $B"; else order="$B $A"; fi
	for c in "${cfgs[@]}"; do
		for b in $order; do
			v=$($b $c --json 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin); print('%.0f' % sum(x['bw_average'] for x in d['results']))")
			echo "$r|$c|$(basename "$b")|$v"
		done
	done
done
