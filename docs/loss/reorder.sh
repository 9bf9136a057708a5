#!/bin/sh
# Reordering without loss: what each reordering costs in resends.
# Loopback gorxe to gorxe under selective repeat (the default), WRITE, READ
# and SEND at 64 KiB (-n 2000) and 1 MiB (-n 200), with 2 % of the
# client's datagrams (WRITE/SEND data, READ requests) overtaken by BY = 1,
# 2 and 3 later ones (--reorder 0.02,dir=send,by=BY; seed 11). Prints one
# JSON line per run: the datagrams reordered, the client's request
# packets sent again (retransmits, of which sr_resent on hole reports),
# recovery timer expiries and tail probes, and the server's hole and
# progress reports and READ responses sent again. Counts, not speed: it
# may run beside other work.
#
# usage: docs/loss/reorder.sh RXECTL LABEL > runs.jsonl
set -eu
RXECTL=$1
LABEL=$2
for op in read write send; do
	for size in 65536 1048576; do
		for by in 1 2 3; do
			n=2000
			[ "$size" = 1048576 ] && n=200
			"$RXECTL" "$op-bw" --loopback -s "$size" -n "$n" --reorder "0.02,dir=send,by=$by" --seed 11 --json 2>/dev/null |
				python3 -c '
import json, sys
label, op, size, by = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
d = json.load(sys.stdin)
t, p = d["transport"], d["peer_transport"]
print(json.dumps({"rev": label, "op": op, "size": size, "by": by,
    "reordered": d["faults"]["send"]["reordered"], "retransmits": t["retransmits"],
    "sr_resent": t["sr_packets_resent"], "rereads": t["read_holes_rereads"],
    "rto": t["rto_expiries"], "probes": t["tail_probes"],
    "peer_read_resp_resent": p["read_responses_resent"],
    "holes": p["sr_holes_reported"], "progress": p["sr_progress_reports"]}))
' "$LABEL" "$op" "$size" "$by" ||
				echo "{\"rev\": \"$LABEL\", \"op\": \"$op\", \"size\": $size, \"by\": $by, \"failed\": true}"
		done
	done
done
