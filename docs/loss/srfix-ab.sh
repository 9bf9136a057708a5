#!/bin/sh
# A/B: rxectl binaries $1 (before) and $2 (after), ROUNDS alternating rounds,
# SR on, loopback, -D $DUR, --seed 11; one JSON line per run (docs/loss/run.py).
set -u
B=$1 A=$2 ROUNDS=${3:-3} DUR=${DUR:-2}
RUN=$(dirname "$0")/run.py
for r in $(seq "$ROUNDS"); do
  for bin in before after; do
    [ $bin = before ] && X=$B || X=$A
    for c in ${CFGS:-"write 65536 0 none" "write 65536 0.01 send" "write 65536 0.02 send" "write 1048576 0 none" "write 1048576 0.01 send" "write 1048576 0.02 send" "send 65536 0 none" "send 65536 0.02 send"}; do
      set -- $c
      drop=""; [ "$4" != none ] && drop="--drop $3,dir=$4"
      flock /tmp/gorxe-bench.lock $X "$1-bw" --loopback -s "$2" -D "$DUR" $drop --seed 11 --selective-repeat on --json 2>/dev/null |
        python3 $RUN "$1" "$2" "$3" "$4" "$bin" | sed "s/^{/{\"round\": $r, /"
    done
  done
done
