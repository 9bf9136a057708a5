#!/bin/bash
# A/B of the fast path (docs/performance.md, "Fast path"): rxectl built from
# main (A) and from this tree (B), with the raw UDP baselines between them, in
# 3 alternating rounds. Run from the repository root, under the bench lock:
#   flock /tmp/gorxe-bench.lock docs/fastpath-ab.sh /path/to/main/checkout
# Prints one line per measurement; results in $OUT (default /tmp/fastpath-ab.txt).
set -euo pipefail
MAIN=${1:?usage: $0 MAIN_CHECKOUT}
OUT=${OUT:-/tmp/fastpath-ab.txt}
W=$(mktemp -d)
(cd "$MAIN" && go build -o "$W/rxectl-A" ./cmd/rxectl)
go build -o "$W/rxectl-B" ./cmd/rxectl
go test -c -o "$W/rawudp.test" ./netdev/rawudp
: > "$OUT"
j() { python3 -c "import json,sys; d=json.load(sys.stdin); r=d['results'][0]; print(' '.join(str(r.get(k,'')) for k in sys.argv[1:]), 'retx', d['transport']['retransmits'])" "$@"; }
for round in 1 2 3; do
  for side in A B; do
    bin=$W/rxectl-$side
    for t in write-bw read-bw send-bw; do
      echo "r$round $side $t 64K $($bin $t --loopback --udp-port 0 -s 65536 -n 4000 --json 2>/dev/null | j bw_average)" >> "$OUT"
    done
    echo "r$round $side write-bw 2B $($bin write-bw --loopback --udp-port 0 -s 2 -n 200000 --json 2>/dev/null | j msg_rate_mpps)" >> "$OUT"
    for t in send-lat write-lat; do
      echo "r$round $side $t 2B $($bin $t --loopback --udp-port 0 -s 2 -n 5000 --json 2>/dev/null | j t_typical t_avg)" >> "$OUT"
    done
  done
  "$W/rawudp.test" -test.run '^$' -test.bench 'UDPLoopback/size=4128' -test.benchtime 40000x 2>&1 | grep Benchmark | sed "s/^/r$round raw /" >> "$OUT"
  "$W/rawudp.test" -test.run '^$' -test.bench 'PingPong' -test.benchtime 5000x 2>&1 | grep Benchmark | sed "s/^/r$round raw /" >> "$OUT"
done
cat "$OUT"
rm -rf "$W"
