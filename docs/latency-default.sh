#!/bin/sh
# rxectl's latency tests spinning (the default) against sleeping in CQ.Wait
# (--busy-poll 0), with --loopback (both ends in one process) and as two
# processes on one host (server bound to 127.0.0.1, client to 127.0.0.2),
# the order of the two alternating per round, and the raw UDP ping-pong of
# netdev/rawudp once per round. Under flock /tmp/gorxe-bench.lock.
#
# usage: docs/latency-default.sh ROUNDS RXECTL RAWUDP_TEST
#   go build -o /tmp/rxectl ./cmd/rxectl
#   go test -c -o /tmp/rawudp.test ./netdev/rawudp
#   docs/latency-default.sh 4 /tmp/rxectl /tmp/rawudp.test
# Lines: "ROUND loop|twoproc busy|sleep TEST t_typical t_avg t_min 99%"
# (µs, the client's row), and "ROUND raw pingpong t_typical t_avg".
set -eu
[ $# -eq 3 ] || { echo "usage: $0 ROUNDS RXECTL RAWUDP_TEST" >&2; exit 2; }
exec flock /tmp/gorxe-bench.lock sh -eu -c '
. "$4/listen.sh"
R=$1 B=$2 RAW=$3 PORT=18600
row() { awk "\$1==\"2\"{print \$5, \$6, \$3, \$8}"; }
for r in $(seq "$R"); do
	order="sleep busy"
	[ $((r % 2)) = 1 ] || order="busy sleep"
	for t in send-lat write-lat read-lat; do
		for v in $order; do
			f=""
			[ "$v" = busy ] || f="--busy-poll 0"
			echo "$r loop $v $t $(timeout 120 "$B" "$t" --loopback --udp-port 0 -s 2 -n 20000 $f 2>/dev/null | row)"
			PORT=$((PORT + 1))
			timeout 120 "$B" "$t" -s 2 -n 20000 $f --bind 127.0.0.1 -p "$PORT" >/dev/null 2>&1 &
			wait_listen "$PORT" || true # the client then fails and says so
			line=$(timeout 120 "$B" "$t" -s 2 -n 20000 $f --bind 127.0.0.2 -p "$PORT" 127.0.0.1 2>/dev/null | row)
			wait
			echo "$r twoproc $v $t $line"
		done
	done
	"$RAW" -test.run "^\$" -test.bench PingPong -test.benchtime 10000x 2>&1 |
		awk -v r="$r" "/Benchmark/{print r, \"raw pingpong\", \$7, \$5}"
done' sh "$@" "$(dirname "$0")"
