#!/bin/sh
# A/B of two rxectl builds on read-lat and atomic-lat (8 bytes, an atomic's size; 20000
# iterations), with --loopback and as two processes on one host (server
# on 127.0.0.1, client on 127.0.0.2), the order of the builds alternating
# per round, and the raw UDP ping-pong of netdev/rawudp once per round
# (its half round trip: t_typical, t_avg). Under flock /tmp/gorxe-bench.lock.
#   docs/answer-ab.sh ROUNDS RXECTL_A RXECTL_B RAWUDP_TEST
# Lines: "ROUND A|B loop|twoproc TEST t_typical t_avg t_min 99%" (µs, the
# client's row: a full round trip) and "ROUND raw pingpong t_typical t_avg".
set -eu
exec flock /tmp/gorxe-bench.lock sh -eu -c '
. "$5/listen.sh"
R=$1 A=$2 B=$3 RAW=$4 PORT=19000
row() { awk "\$1==\"8\"{print \$5, \$6, \$3, \$8}"; }
for r in $(seq $R); do
  order="A B"; [ $((r % 2)) = 1 ] || order="B A"
  for t in read-lat atomic-lat; do for v in $order; do
    if [ $v = A ]; then bin=$A; else bin=$B; fi
    echo "$r $v loop $t $(timeout 120 $bin $t --loopback --udp-port 0 -s 8 -n 20000 2>/dev/null | row)"
    PORT=$((PORT+1))
    timeout 120 $bin $t -s 8 -n 20000 --bind 127.0.0.1 -p $PORT >/dev/null 2>&1 &
    wait_listen $PORT || true
    echo "$r $v twoproc $t $(timeout 120 $bin $t -s 8 -n 20000 --bind 127.0.0.2 127.0.0.1 -p $PORT 2>/dev/null | row)"
    wait
  done; done
  echo "$r raw pingpong $($RAW -test.run "^\$" -test.bench PingPong -test.benchtime 2s | awk "/PingPong/{print \$7, \$5}")"
done' sh "$@" "$(dirname "$0")"
