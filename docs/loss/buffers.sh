#!/bin/sh
# Capped socket buffers: loopback WRITE, READ and SEND at 64 KiB and 1 MiB,
# as root (SO_RCVBUFFORCE: 64 MiB buffers) and as a user without
# CAP_NET_ADMIN on a stock kernel (net.core.rmem_max = wmem_max = 212992),
# measured in one run, alternating, ROUNDS rounds of DURATION seconds each,
# for each rxectl binary given (LABEL=PATH, e.g. before and after a change).
# The non-root runs are real: setpriv drops to uid 65534, so the kernel
# caps SO_RCVBUF itself. net.core.rmem_max/wmem_max are set to 212992 for
# the run and restored afterwards, under flock /tmp/gorxe-bench.lock (the
# sysctl is machine-wide).
#
# usage: docs/loss/buffers.sh ROUNDS DURATION LABEL=RXECTL...
# Environment: OPS (default "write read send"), EXTRA (more rxectl flags,
# e.g. "-q 4": MiB/s is then the sum over the QPs).
# output: one line per run: label user op size MiB/s retransmits
# rcvbuf_errors (the growth of /proc/net/snmp's Udp RcvbufErrors during the
# run: datagrams the kernel dropped on full socket receive buffers)
# (--udp-port 0: an ephemeral RoCE port, so other processes on 4791 do not
# answer or collide)
set -eu
exec flock /tmp/gorxe-bench.lock sh -eu -c '
ROUNDS=$1 DUR=$2; shift 2
r0=$(sysctl -n net.core.rmem_max) w0=$(sysctl -n net.core.wmem_max)
trap "sysctl -qw net.core.rmem_max=$r0 net.core.wmem_max=$w0" EXIT INT TERM
sysctl -qw net.core.rmem_max=212992 net.core.wmem_max=212992
rcvbuferrs() { # Udp RcvbufErrors of the kernel, all sockets of the machine
	awk '\''$1=="Udp:" && $2 ~ /^[0-9]/ {print $6}'\'' /proc/net/snmp
}
run() { # label rxectl user op size
	if [ "$3" = user ]; then pre="setpriv --reuid 65534 --regid 65534 --clear-groups"; else pre=""; fi
	e0=$(rcvbuferrs)
	# shellcheck disable=SC2086
	out=$($pre "$2" "$4-bw" --loopback --udp-port 0 -s "$5" -D "$DUR" ${EXTRA:-} --json 2>/tmp/gorxe-loss-buffers.err) &&
		echo "$out" | python3 -c "import json,sys; d=json.load(sys.stdin); t=d[\"transport\"]; print(\"$1 $3 $4 $5\", round(sum(x[\"bw_average\"] for x in d[\"results\"]),1), t[\"retransmits\"], $(rcvbuferrs) - $e0)" ||
		echo "$1 $3 $4 $5 failed: $(tail -c 300 /tmp/gorxe-loss-buffers.err)"
}
for r in $(seq "$ROUNDS"); do
	for op in ${OPS:-write read send}; do
		for size in 65536 1048576; do
			for b in "$@"; do
				run "${b%%=*}" "${b#*=}" root $op $size
				run "${b%%=*}" "${b#*=}" user $op $size
			done
		done
	done
done
' sh "$@"
