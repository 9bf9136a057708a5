#!/bin/sh
# Two rxectl builds A and B, each run as a server process bound to
# 127.0.0.1 and a client process bound to 127.0.0.2 on this host, the order
# of A and B reversed every other round, under flock /tmp/gorxe-bench.lock:
# 64 KiB write-bw, read-bw and send-bw (-D 2), 2-byte write-bw (-n
# 1000000), and 2-byte send-lat, write-lat and read-lat (-n 20000).
#
# usage: docs/twoproc-ab.sh ROUNDS RXECTL_A RXECTL_B
# Lines: "ROUND TEST A|B RESULT cpu=SECONDS": RESULT is MiB/s and Mpps for
# the bandwidth tests, t_typical and t_avg (µs) for the latency tests;
# cpu is the user + system time of both processes.
set -eu
[ $# -eq 3 ] || { echo "usage: $0 ROUNDS RXECTL_A RXECTL_B" >&2; exit 2; }
exec flock /tmp/gorxe-bench.lock sh -eu -c '
. "$4/listen.sh"
R=$1 A=$2 B=$3 PORT=20100
dir=$(mktemp -d)
trap "rm -rf $dir" EXIT
for r in $(seq "$R"); do
	order="A B"
	[ $((r % 2)) = 1 ] || order="B A"
	for t in write-bw read-bw send-bw write-bw-2 send-lat write-lat read-lat; do
		for v in $order; do
			PORT=$((PORT + 1))
			b=$A
			[ "$v" = A ] || b=$B
			case $t in
			write-bw-2) tt=write-bw a="-s 2 -n 1000000" ;;
			*-bw) tt=$t a="-D 2" ;;
			*) tt=$t a="-n 20000" ;;
			esac
			/usr/bin/time -f "%U %S" -o "$dir/srv.t" "$b" "$tt" $a --bind 127.0.0.1 -p "$PORT" >/dev/null 2>&1 &
			wait_listen "$PORT" || true # the client then fails and says so
			out=$(/usr/bin/time -f "%U %S" -o "$dir/cli.t" "$b" "$tt" $a --bind 127.0.0.2 -p "$PORT" --json 127.0.0.1 2>/dev/null) || true
			wait || true
			cpu=$(cat "$dir/srv.t" "$dir/cli.t" | awk "{s += \$1 + \$2} END {print s}")
			res=$(echo "$out" | python3 -c "import json,sys; d=json.load(sys.stdin)[\"results\"][0]; print(\"%s %s\" % (d[\"bw_average\"], d[\"msg_rate_mpps\"]) if \"bw_average\" in d else \"%s %s\" % (d[\"t_typical\"], d[\"t_avg\"]))" 2>/dev/null || echo failed)
			echo "$r $t $v $res cpu=$cpu"
		done
	done
done' sh "$@" "$(dirname "$0")"
