#!/bin/sh
# Loss sweep (issue 13 item 4): loopback gorxe to gorxe, WRITE, READ and
# SEND at 64 KiB and 1 MiB, --drop p for p in 0, 0.1%, 1%, 2%, 5% (seed
# 11) applied to the client's datagrams in one direction at a time:
# "req" drops what the client sends (WRITE/SEND data, READ requests),
# "resp" what it receives (ACKs, READ responses). Each point runs with
# --selective-repeat on and off (off is the go-back-N wire a kernel-rxe
# peer gets), alternating within the point, DURATION seconds each (default
# 2; 1 is the reduced sweep, about 4 minutes), all under flock
# /tmp/gorxe-bench.lock. Prints one JSON line per run; pipe them into
# docs/loss/table.py (the table of docs/performance.md, "Loss") and
# docs/loss/plot.py (the SVG plot of goodput against loss).
#
# usage: docs/loss/sweep.sh RXECTL [DURATION] [SR-MODES...] > runs.jsonl
#   e.g. docs/loss/sweep.sh ./rxectl 2 on off > /tmp/loss.jsonl
# Environment: OPS (default "write read send"), SIZES ("65536 1048576"),
# PS ("0 0.001 0.01 0.02 0.05"), DIRS ("req resp").
set -eu
RXECTL=$1
DUR=${2:-2}
shift $(( $# >= 2 ? 2 : 1 ))
MODES=${*:-on off}
exec flock /tmp/gorxe-bench.lock sh -eu -c '
RXECTL=$1 DUR=$2 MODES=$3
err=$(mktemp)
trap "rm -f $err" EXIT
for op in ${OPS:-write read send}; do
	for size in ${SIZES:-65536 1048576}; do
		for p in ${PS:-0 0.001 0.01 0.02 0.05}; do
			dirs=${DIRS:-req resp}
			[ "$p" = 0 ] && dirs=none
			for dir in $dirs; do
				for m in $MODES; do
					case $dir in
					req) drop="--drop $p,dir=send" ;;
					resp) drop="--drop $p,dir=recv" ;;
					*) drop="" ;;
					esac
					# shellcheck disable=SC2086
					"$RXECTL" "$op-bw" --loopback -s "$size" -D "$DUR" $drop --seed 11 --selective-repeat "$m" --json 2>"$err" |
						python3 "$(dirname "$0")/run.py" "$op" "$size" "$p" "$dir" "$m" ||
						python3 -c "import json, sys; print(json.dumps({\"op\": \"$op\", \"size\": $size, \"p\": $p, \"dir\": \"$dir\", \"mode\": \"$m\", \"failed\": True, \"error\": open(sys.argv[1]).read().strip()[-300:]}))" "$err"
				done
			done
		done
	done
done
' "$0" "$RXECTL" "$DUR" "$MODES"
