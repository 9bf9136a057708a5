#!/bin/sh
# Two-process runs on one host (docs/performance.md, "Raw system calls"):
# an rxectl server bound to 127.0.0.1 and a client bound to 127.0.0.2,
# each its own process, for each rxectl binary given, in alternating
# rounds (the order reversed every other round), all under flock
# /tmp/gorxe-bench.lock. Prints one line per run: round, binary, the
# client's message rate (Mpps) and bandwidth (MiB/s), and the CPU seconds
# (user + system) the two processes used together.
#
# usage: docs/twoproc.sh ROUNDS TEST SIZE ITERS RXECTL...
#   e.g. docs/twoproc.sh 5 write-bw 2 2000000 /tmp/rxectl-a /tmp/rxectl-b
# Environment: PORT (the exchange's TCP port, default 18515).
set -eu
[ $# -ge 5 ] || { echo "usage: $0 ROUNDS TEST SIZE ITERS RXECTL..." >&2; exit 2; }
ROUNDS=$1 TEST=$2 SIZE=$3 ITERS=$4
shift 4
exec flock /tmp/gorxe-bench.lock sh -eu -c '
ROUNDS=$1 TEST=$2 SIZE=$3 ITERS=$4 PORT=$5
shift 5
dir=$(mktemp -d)
trap "rm -rf $dir" EXIT
r=1
while [ "$r" -le "$ROUNDS" ]; do
	order=$*
	if [ $((r % 2)) = 0 ]; then
		order=$(for b in "$@"; do echo "$b"; done | tac | tr "\n" " ")
	fi
	for b in $order; do
		/usr/bin/time -f "%U %S" -o "$dir/srv.t" "$b" "$TEST" -s "$SIZE" -n "$ITERS" \
			--bind 127.0.0.1 -p "$PORT" >"$dir/srv.out" 2>&1 &
		srv=$!
		# The server listens once its exchange port is open.
		i=0
		until ss -ltn "sport = :$PORT" | grep -q LISTEN; do
			i=$((i + 1))
			[ "$i" -lt 100 ] || { echo "server did not listen: $(cat "$dir/srv.out")" >&2; kill "$srv"; exit 1; }
			sleep 0.05
		done
		/usr/bin/time -f "%U %S" -o "$dir/cli.t" "$b" "$TEST" -s "$SIZE" -n "$ITERS" \
			--bind 127.0.0.2 -p "$PORT" --json 127.0.0.1 >"$dir/cli.json" 2>"$dir/cli.err" ||
			{ echo "client failed: $(tail -3 "$dir/cli.err")" >&2; kill "$srv"; exit 1; }
		wait "$srv"
		python3 - "$r" "$b" "$dir" <<"PY"
import json, sys
r, b, d = sys.argv[1:]
res = json.load(open(d + "/cli.json"))["results"][0]
cpu = sum(float(x) for f in ("srv.t", "cli.t") for x in open(d + "/" + f).read().split()[-2:])
print(r, b, "%.3f Mpps %.1f MiB/s %.2f cpu-s" % (res["msg_rate_mpps"], res["bw_average"], cpu))
PY
	done
	r=$((r + 1))
done
' "$0" "$ROUNDS" "$TEST" "$SIZE" "$ITERS" "${PORT:-18515}" "$@"
