#!/bin/bash
# A/B: main's rxectl (A) and h/fastpath's (B), raw baselines between them, 3 alternating rounds.
cd /tmp/fpbench
R=/tmp/fpbench/results.txt
: > $R
j() { python3 -c "import json,sys; d=json.load(sys.stdin); r=d['results'][0]; print(' '.join(str(r.get(k,'')) for k in sys.argv[1:]), 'retx', d['transport']['retransmits'])" "$@"; }
for round in 1 2 3; do
  for side in A B; do
    bin=/tmp/rxectl-main; [ $side = B ] && bin=/tmp/rxectl-fast
    for t in write-bw read-bw send-bw; do
      echo "r$round $side $t 64K $($bin $t --loopback --udp-port 0 -s 65536 -n 4000 --json 2>/dev/null | j bw_average)" >> $R
    done
    echo "r$round $side write-bw 2B $($bin write-bw --loopback --udp-port 0 -s 2 -n 200000 --json 2>/dev/null | j msg_rate_mpps)" >> $R
    for t in send-lat write-lat; do
      echo "r$round $side $t 2B $($bin $t --loopback --udp-port 0 -s 2 -n 5000 --json 2>/dev/null | j t_typical t_avg)" >> $R
    done
  done
  ./rawudp.test -test.run '^$' -test.bench 'UDPLoopback/size=4128' -test.benchtime 40000x 2>&1 | grep Benchmark | sed "s/^/r$round raw /" >> $R
  ./rawudp.test -test.run '^$' -test.bench 'PingPong' -test.benchtime 5000x 2>&1 | grep Benchmark | sed "s/^/r$round raw /" >> $R
done
echo END >> $R
