#!/bin/sh
# Runs a command and appends " steal% N" to each line of its standard
# output: N is the share of the processors' time (all of them, over the
# command's wall time) that the hypervisor took from this VM while it ran
# (/proc/stat's steal column, in USER_HZ ticks of 10 ms). A run with a large
# N measured a machine that was not all there. Used by docs/bench64k-ab.sh,
# docs/skipwork.sh and docs/cpu-ab.sh:
#   docs/steal.sh COMMAND [ARG...]
set -eu
s0=$(awk '/^cpu /{print $9}' /proc/stat)
t0=$(date +%s.%N)
out=$("$@")
s1=$(awk '/^cpu /{print $9}' /proc/stat)
t1=$(date +%s.%N)
st=$(echo "$s0 $s1 $t0 $t1 $(nproc)" | awk '{printf "%.0f", ($2 - $1) / (($4 - $3) * $5)}')
printf '%s\n' "$out" | sed "s/\$/ steal% $st/"
