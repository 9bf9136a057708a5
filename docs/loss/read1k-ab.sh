#!/bin/sh
# READ 1 KiB (single-packet READs), loopback, selective repeat $SR (on by
# default; SR=off for go-back-N, what a kernel-rxe peer gets), 2 s runs: loss-free, 1 % loss on responses and 1 % on requests (seed 10 +
# round), the two builds alternating within each point. Prints "BUILD
# ROUND" and docs/loss/run.py's line per run.
#
# usage: docs/loss/read1k-ab.sh ROUNDS RXECTL_A RXECTL_B  (from the repository root)
set -eu
R=$1 A=$2 B=$3
SR=${SR:-on}
for r in $(seq "$R"); do
 for spec in "0 recv" "0.01 recv" "0.01 send"; do
  set -- $spec
  for b in "$A" "$B"; do
   if [ "$1" = 0 ]; then drop=""; else drop="--drop $1,dir=$2 --seed $((10+r))"; fi
   echo "$(basename "$b") $r $("$b" read-bw --loopback -s 1024 -D 2 --selective-repeat=$SR $drop --json 2>/dev/null | python3 docs/loss/run.py read 1024 $1 $([ $2 = send ] && echo req || echo resp) "$SR")"
  done
 done
done
