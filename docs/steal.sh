#!/bin/sh
# Runs a command and appends " steal% N" to each line of its standard
# output: N is the share of the processors' time (all online processors,
# as /proc/stat's cpu line counts them, over the command's wall time) that
# the hypervisor took from this VM while it ran (/proc/stat's steal column,
# in USER_HZ ticks of 10 ms). A run with a large N measured a machine that
# was not all there. The command's exit status is kept. Used by
# docs/bench64k-ab.sh, docs/skipwork.sh and docs/cpu-ab.sh:
#   docs/steal.sh COMMAND [ARG...]
set -u
s0=$(awk '/^cpu /{print $9}' /proc/stat)
t0=$(date +%s.%N)
rc=0
out=$("$@") || rc=$?
s1=$(awk '/^cpu /{print $9}' /proc/stat)
t1=$(date +%s.%N)
cpus=$(grep -c '^cpu[0-9]' /proc/stat)
st=$(echo "$s0 $s1 $t0 $t1 $cpus" | awk '{w = ($4 - $3) * $5; printf "%.0f", (w > 0 ? ($2 - $1) / w : 0)}')
[ -n "$out" ] && printf '%s\n' "$out" | sed "s/\$/ steal% $st/"
exit "$rc"
