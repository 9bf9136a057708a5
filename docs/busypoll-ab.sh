#!/bin/sh
# The measurements of docs/performance.md, "Busy polling reads the socket":
# rxectl built from another checkout (A) and from this tree (B), the raw UDP
# ping-pong in every round, the order of A and B alternating per round.
# Run from the repository root, under the bench lock:
#   flock /tmp/gorxe-bench.lock docs/busypoll-ab.sh /path/to/base/checkout
# Lines "rROUND VARIANT TEST t_typical t_avg t_min 99%" (latency, µs),
# "rROUND raw pingpong t_typical t_avg" and "rROUND VARIANT TEST qN MiB/s"
# go to $OUT (default /tmp/busypoll-ab.txt); a failed run leaves its fields
# empty and its stderr in $W.
set -eu
BASE=${1:?usage: $0 BASE_CHECKOUT}
OUT=${OUT:-/tmp/busypoll-ab.txt}
W=$(mktemp -d)
(cd "$BASE" && go build -o "$W/rxectl-A" ./cmd/rxectl)
go build -o "$W/rxectl-B" ./cmd/rxectl
go test -c -o "$W/rawudp.test" ./netdev/rawudp
: > "$OUT"
lat() { # round variant binary test [flags]
	r=$1 v=$2 bin=$3 t=$4
	shift 4
	line=$("$bin" "$t" --loopback --udp-port 0 -s 2 -n 10000 "$@" 2>"$W/err-$v-$t-$r" | awk '$1=="2"{print $5, $6, $3, $8}')
	echo "r$r $v $t $line" >> "$OUT"
}
for r in 1 2 3 4 5 6; do
	order="A B Bbusy"
	[ $((r % 2)) = 0 ] && order="Bbusy B A"
	for v in $order; do
		for t in send-lat write-lat; do
			case $v in
			A) lat "$r" A "$W/rxectl-A" "$t" ;;
			B) lat "$r" B "$W/rxectl-B" "$t" ;;
			Bbusy) lat "$r" Bbusy "$W/rxectl-B" "$t" --busy-poll 1s ;;
			esac
		done
	done
	"$W/rawudp.test" -test.run '^$' -test.bench PingPong -test.benchtime 10000x 2>&1 |
		awk -v r="$r" '/Benchmark/{print "r" r " raw pingpong", $7, $5}' >> "$OUT"
done
for r in 1 2 3 4; do
	order="A B"
	[ $((r % 2)) = 0 ] && order="B A"
	for t in write-bw read-bw; do
		for q in 1 2 4; do
			for v in $order; do
				bw=$("$W/rxectl-$v" "$t" --loopback --udp-port 0 -s 65536 -q "$q" 2>/dev/null | awk '$1=="65536"{print $4}')
				echo "r$r $v $t q$q $bw" >> "$OUT"
			done
		done
	done
done
cat "$OUT"
