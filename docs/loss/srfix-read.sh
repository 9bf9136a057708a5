#!/bin/sh
# READ 1 MiB, loss on responses: SR on/off alternating, plus loss-free, ROUNDS rounds.
X=$1 ROUNDS=${2:-2} N=${N:-100}
RUN=$(dirname "$0")/run.py
for r in $(seq "$ROUNDS"); do
  for c in "0 none on" "0.01 recv on" "0.01 recv off" "0.02 recv on" "0.02 recv off"; do
    set -- $c
    drop=""; [ "$2" != none ] && drop="--drop $1,dir=$2"
    flock /tmp/gorxe-bench.lock $X read-bw --loopback -s 1048576 -n $N $drop --seed 11 --selective-repeat $3 --json 2>/dev/null |
      python3 $RUN read 1048576 "$1" "$2" "$3" | sed "s/^{/{\"round\": $r, /"
  done
done
