#!/bin/sh
# The measurements of docs/performance.md, "Fast path: fewer wake-ups and
# system calls per message": test binaries and rxectl built from several
# commits (variant=commit pairs), each with this tree's benchmark files
# (rxe/bench_test.go, rxe/msgrate_bench_test.go) copied in, run in
# alternating order (reversed in even rounds), everything under the bench
# lock. Run from the repository root:
#   flock /tmp/gorxe-bench.lock docs/fastpath2-ab.sh ROUNDS M=main H=HEAD ...
# Output lines (to $OUT, default /tmp/fastpath2-ab.txt):
#   rR VARIANT bench NAME metric=value ...     (go test benchmarks)
#   rR VARIANT rxectl TEST t_typical t_avg     (latency, µs) or Mpps
#   rR raw pingpong t_typical t_avg            (rawudp.PingPong, µs)
set -eu
ROUNDS=${1:?usage: $0 ROUNDS VARIANT=COMMIT...}
shift
OUT=${OUT:-/tmp/fastpath2-ab.txt}
W=${W:-$(mktemp -d)}
root=$(pwd)
vs=""
for vc in "$@"; do
	v=${vc%%=*} c=${vc#*=}
	if [ ! -x "$W/rxe-$v.test" ]; then
		rm -rf "$W/src-$v" && mkdir -p "$W/src-$v"
		git archive "$c" | tar -x -C "$W/src-$v"
		cp rxe/bench_test.go rxe/msgrate_bench_test.go "$W/src-$v/rxe/"
		(cd "$W/src-$v" && go test -c -o "$W/rxe-$v.test" ./rxe && go build -o "$W/rxectl-$v" ./cmd/rxectl)
	fi
	vs="$vs $v"
done
[ -x "$W/rawudp.test" ] || go test -c -o "$W/rawudp.test" ./netdev/rawudp
rev() { r=""; for x in "$@"; do r="$x $r"; done; echo $r; }
metrics='MB/s gso-ratio ratio cpu-µs/op gsoUDP-cpu-µs/64KiB allocs/op Mpps syscalls/op half-rtt-µs avg-µs raw-half-rtt-µs avg-ratio p99-µs'
: > "$OUT"
for r in $(seq 1 "$ROUNDS"); do
	order=$vs
	[ $((r % 2)) = 0 ] && order=$(rev $vs)
	for v in $order; do
		(cd "$root/rxe" && "$W/rxe-$v.test" -test.run '^$' -test.bench '64K/udp|Write2BRate' -test.benchtime 2s 2>&1 &&
			"$W/rxe-$v.test" -test.run '^$' -test.bench 'Lat2B' -test.benchtime 5000x 2>&1) | awk -v p="r$r $v bench" -v want="$metrics" '
			BEGIN{n=split(want,W," ")} /^Benchmark/{out=p" "$1; for(j=1;j<=n;j++) for(i=3;i<=NF;i++) if($(i+1)==W[j]) out=out" "W[j]"="$i; print out}' >> "$OUT"
		rate=$("$W/rxectl-$v" write-bw --loopback --udp-port 0 -s 2 -n 1000000 2>/dev/null | awk '$1=="2"{print $NF}')
		echo "r$r $v rxectl write-bw-2B $rate" >> "$OUT"
		for t in send-lat write-lat; do
			for bp in 0 1s; do
				line=$("$W/rxectl-$v" "$t" --loopback --udp-port 0 -s 2 -n 10000 --busy-poll $bp 2>/dev/null | awk '$1=="2"{print $5, $6}')
				echo "r$r $v rxectl $t-busy$bp $line" >> "$OUT"
			done
		done
	done
	"$W/rawudp.test" -test.run '^$' -test.bench PingPong -test.benchtime 10000x 2>&1 |
		awk -v r="$r" '/Benchmark/{print "r" r " raw pingpong", $7, $5}' >> "$OUT"
done
cat "$OUT"
