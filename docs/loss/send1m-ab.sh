#!/bin/bash
# usage: docs/loss/send1m-ab.sh ROUNDS, with the two builds at /tmp/rxectl.A and /tmp/rxectl.B; alternating order each round.
# prints round|command|build|bw_average (MiB/s) per run
R=$1
cfgs=("send-bw --loopback -s 1048576 -D 2 --seed 11 --selective-repeat on" "send-bw --loopback -s 1048576 -D 2 --drop 1%,dir=send --seed 11 --selective-repeat on")
for r in $(seq 1 $R); do
  if [ $((r%2)) = 1 ]; then order="A B"; else order="B A"; fi
  for c in "${cfgs[@]}"; do
    for b in $order; do
      v=$(/tmp/rxectl.$b $c --json 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin); print('%.0f' % d['results'][0]['bw_average'])")
      echo "$r|$c|$b|$v"
    done
  done
done
