#!/bin/sh
# Loss sweep: loopback WRITE, READ and SEND at 64 KiB and 1 MiB, with
# --drop p for p in 0, 0.1%, 1%, 2%, 5% (seed 11, applied to the client's
# datagrams in both directions: requests it sends and responses it
# receives), for each --recovery mode given (default: on and off; off is
# what a kernel-rxe peer's recovery amounts to: the IB ACK timeout only).
# Runs alternate modes within each point, DURATION seconds each, under
# flock /tmp/gorxe-bench.lock. Prints one JSON line per run; pipe it into
# docs/loss/table.py for the table of docs/performance.md ("Loss").
#
# usage: docs/loss/sweep.sh RXECTL [DURATION] [MODES...] | python3 docs/loss/table.py
set -eu
RXECTL=$1
DUR=${2:-2}
shift $(( $# >= 2 ? 2 : 1 ))
MODES=${*:-on off}
exec flock /tmp/gorxe-bench.lock sh -eu -c '
RXECTL=$1 DUR=$2 MODES=$3
for op in write read send; do
	for size in 65536 1048576; do
		for p in 0 0.001 0.01 0.02 0.05; do
			for m in $MODES; do
				"$RXECTL" "$op-bw" --loopback -s "$size" -D "$DUR" --drop "$p" --seed 11 --recovery "$m" --json 2>/dev/null |
					python3 -c "
import json, sys
d = json.load(sys.stdin)
r, t = d[\"results\"][0], d[\"transport\"]
f = d.get(\"faults\") or {\"send\": {\"dropped\": 0}, \"recv\": {\"dropped\": 0}}
print(json.dumps({\"op\": \"$op\", \"size\": $size, \"p\": $p, \"mode\": \"$m\", \"bw\": r[\"bw_average\"],
  \"iters\": r[\"iterations\"], \"lost\": f[\"send\"][\"dropped\"] + f[\"recv\"][\"dropped\"],
  \"sent\": d[\"device\"][\"sent_pkts\"] + d[\"peer_device\"][\"sent_pkts\"],
  \"rto\": t.get(\"rto_expiries\", 0), \"ib\": t[\"timeouts\"] + d[\"peer_transport\"][\"timeouts\"],
  \"probes\": t.get(\"tail_probes\", 0), \"srtt_us\": t.get(\"srtt_us\", 0)}))
" || echo "{\"op\": \"$op\", \"size\": $size, \"p\": $p, \"mode\": \"$m\", \"failed\": true}"
			done
		done
	done
done
' sh "$RXECTL" "$DUR" "$MODES"
