#!/bin/sh
# rxectl's 64 KiB write-bw, read-bw and send-bw between two processes on
# this host (server bound to 127.0.0.1, client to 127.0.0.2), each against
# the raw UDP GSO+GRO baseline (netdev/rawudp's BenchmarkUDPLoopback,
# 4128-byte datagrams: sender and receiver goroutines of one process)
# measured just before and just after it, ROUNDS rounds, under flock
# /tmp/gorxe-bench.lock.
#
# usage: docs/twoproc-gso.sh ROUNDS RXECTL RAWUDP_TEST
#   go build -o /tmp/rxectl ./cmd/rxectl
#   go test -c -o /tmp/rawudp.test ./netdev/rawudp
# Lines: "ROUND TEST MiB/s raw-before-MB/s raw-after-MB/s ratio", where
# ratio is the RoCE payload rate (MB/s) over the mean of the two raw UDP
# payload rates (as rxe's in-process gso-ratio).
set -eu
[ $# -eq 3 ] || { echo "usage: $0 ROUNDS RXECTL RAWUDP_TEST" >&2; exit 2; }
exec flock /tmp/gorxe-bench.lock sh -eu -c '
. "$4/listen.sh"
R=$1 B=$2 RAW=$3 PORT=20700
raw() {
	"$RAW" -test.run "^\$" -test.bench "UDPLoopback/size=4128/gso=true" -test.benchtime 1000000x 2>&1 |
		awk "/Benchmark/{for (i = 1; i < NF; i++) if (\$(i+1) == \"Gbit/s\") print \$i * 125}"
}
for r in $(seq "$R"); do
	before=$(raw)
	for t in write-bw read-bw send-bw; do
		PORT=$((PORT + 1))
		"$B" "$t" -D 2 --bind 127.0.0.1 -p "$PORT" >/dev/null 2>&1 &
		wait_listen "$PORT" || true # the client then fails and says so
		bw=$("$B" "$t" -D 2 --bind 127.0.0.2 -p "$PORT" --json 127.0.0.1 2>/dev/null |
			python3 -c "import json,sys; print(json.load(sys.stdin)[\"results\"][0][\"bw_average\"])")
		wait
		after=$(raw)
		echo "$r $t $bw $before $after" | awk "{printf \"%s %s %.0f %.0f %.0f %.3f\\n\", \$1, \$2, \$3, \$4, \$5, \$3 * 1.048576 / ((\$4 + \$5) / 2)}"
		before=$after
	done
done' sh "$@" "$(dirname "$0")"
