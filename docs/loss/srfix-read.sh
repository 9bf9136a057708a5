#!/bin/sh
# READ with loss on responses (docs/performance.md, "Selective repeat:
# fixes"): per round, the loss-free run, then 1 % and 2 % with
# --selective-repeat on and off alternating, under flock. One JSON line
# per run (docs/loss/run.py).
# usage: [SIZE=1048576] [LEN="-n 100"] docs/loss/srfix-read.sh RXECTL [ROUNDS]
X=$1 ROUNDS=${2:-2} SIZE=${SIZE:-1048576} LEN=${LEN:--n 100}
RUN=$(dirname "$0")/run.py
for r in $(seq "$ROUNDS"); do
  for c in "0 none on" "0.01 recv on" "0.01 recv off" "0.02 recv on" "0.02 recv off"; do
    set -- $c
    drop=""; [ "$2" != none ] && drop="--drop $1,dir=$2"
    # shellcheck disable=SC2086
    flock /tmp/gorxe-bench.lock "$X" read-bw --loopback -s "$SIZE" $LEN $drop --seed 11 --selective-repeat "$3" --json 2>/dev/null |
      python3 "$RUN" read "$SIZE" "$1" "$2" "$3" | sed "s/^{/{\"round\": $r, /"
  done
done
