#!/bin/sh
# Lossy runs paired with their own loss-free runs, for builds A/B/...:
# each round runs, for each build in turn, OP-bw --loopback -s SIZE -D 2
# loss-free and then with --drop P on requests (dir=send, seed 11), so
# that each lossy run divides by the loss-free run of the same build a
# few seconds before it. Prints one line per run: label p MiB/s and the
# server's ooo_held and ooo_placed (peer_transport in --json: requests
# held out of order, and those of them whose payload was placed on
# arrival). docs/loss/pairtab.py makes the ratios.
#
# usage: docs/loss/paired-ab.sh ROUNDS OP SIZE P LABEL=RXECTL...
R=$1 OP=$2 S=$3 P=$4; shift 4
for r in $(seq "$R"); do
	for b in "$@"; do
		for p in 0 "$P"; do
			"${b#*=}" "$OP-bw" --loopback --udp-port 0 -s "$S" -D 2 --drop "$p,dir=send" --seed 11 --json 2>/dev/null | python3 -c "
import json,sys; d=json.load(sys.stdin); t=d.get('peer_transport',{})
print('${b%%=*}', '$p', round(d['results'][0]['bw_average'],1), t.get('ooo_held',0), t.get('ooo_placed',0))"
		done
	done
done
