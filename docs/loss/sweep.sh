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
# With PAIRED=1 every lossy run is paired with a loss-free run of the same
# operation, size and mode just before it (its line has "dir": "base" and
# both carry the same "pair" number): table.py then divides each lossy
# run by its own base instead of by the point's one loss-free base, so
# that the machine's speed, which moves by a third between minutes on
# this VM, moves both sides of each ratio alike. It doubles the runs.
#
# usage: docs/loss/sweep.sh RXECTL [DURATION] [SR-MODES...] > runs.jsonl
#   e.g. docs/loss/sweep.sh ./rxectl 2 on off > /tmp/loss.jsonl
# Environment: OPS (default "write read send"), SIZES ("65536 1048576"),
# PS ("0 0.001 0.01 0.02 0.05"), DIRS ("req resp"), PAIRED (unset: off).
set -eu
RXECTL=$1
DUR=${2:-2}
shift $(( $# >= 2 ? 2 : 1 ))
MODES=${*:-on off}
exec flock /tmp/gorxe-bench.lock env PAIRED="${PAIRED:-}" sh -eu -c '
RXECTL=$1 DUR=$2 MODES=$3
err=$(mktemp)
trap "rm -f $err" EXIT
pair=0
# run OP SIZE P DIR MODE DROP: one run, one JSON line (run.py), or a line
# saying it failed.
run() {
	# shellcheck disable=SC2086
	"$RXECTL" "$1-bw" --loopback -s "$2" -D "$DUR" $6 --seed 11 --selective-repeat "$5" --json 2>"$err" |
		python3 "$(dirname "$0")/run.py" "$1" "$2" "$3" "$4" "$5" ||
		python3 -c "import json, os, sys; r = {\"op\": \"$1\", \"size\": $2, \"p\": $3, \"dir\": \"$4\", \"mode\": \"$5\", \"failed\": True, \"error\": open(sys.argv[1]).read().strip()[-300:]}; r.update({\"pair\": int(os.environ[\"PAIR\"])} if os.environ.get(\"PAIR\") else {}); print(json.dumps(r))" "$err"
}
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
					if [ -n "${PAIRED:-}" ] && [ "$dir" != none ]; then
						pair=$((pair + 1))
						export PAIR=$pair
						run "$op" "$size" 0 base "$m" ""
						run "$op" "$size" "$p" "$dir" "$m" "$drop"
						unset PAIR
					else
						run "$op" "$size" "$p" "$dir" "$m" "$drop"
					fi
				done
			done
		done
	done
done
' "$0" "$RXECTL" "$DUR" "$MODES"
