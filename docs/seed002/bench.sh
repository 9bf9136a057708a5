#!/usr/bin/env bash
# Seed 002 reproduction: rxectl read-bw across a veth pair whose responder side
# has a tbf qdisc small enough that the kernel refuses sends (ENOBUFS), once per
# --local-drop-mode (adaptive, timeout, spin). Prints a markdown table of BW
# average per message size and the CPU seconds each mode cost. See docs/seed002.md.
#
# Usage (from anywhere in the repository, as root):
#   docs/seed002/bench.sh [-q]        # -q: sizes 2 B, 64 KiB, 1..8 MiB only
# Environment: MODES (default "adaptive timeout spin"), RATE (default 1gbit),
#   VETH_MTU (default 9000: RoCE MTU 4096; 1500 gives the seed's 1024),
#   BURST and LIMIT of the tbf (default 64kb and 32kb),
#   ITERS_SMALL (≤ 64 KiB, default 200), ITERS_MID (128 KiB..1 MiB, default 50),
#   ITERS_LARGE (2..8 MiB, default 20), RUN_TIMEOUT (seconds per size, default 90),
#   REPEAT (default 1: rounds over all modes and sizes; the table shows each
#   size's median, the CPU and counter columns the sums over all rounds),
#   KEEP=1 keeps the raw JSON in the temporary directory,
#   ARGS adds rxectl flags to both ends (e.g. ARGS=--gso=off).
#
# Everything happens inside two network namespaces this script creates and
# deletes (10.99.0.1 server, 10.99.0.2 client); nothing leaves the machine.
set -euo pipefail

skip() { echo "bench.sh: skipped: $*" >&2; exit 0; }
[[ $(id -u) == 0 ]] || skip "needs root (network namespaces, tc)"
for c in ip tc go; do command -v "$c" >/dev/null || skip "needs '$c' (apt-get install iproute2 / a Go toolchain)"; done
ip netns list >/dev/null 2>&1 || skip "'ip netns' does not work here"

quick=0
[[ ${1:-} == -q ]] && quick=1
MODES=${MODES:-"adaptive timeout spin"}
RATE=${RATE:-1gbit}
VETH_MTU=${VETH_MTU:-9000}
BURST=${BURST:-64kb}
LIMIT=${LIMIT:-32kb}
ITERS_SMALL=${ITERS_SMALL:-200}
ITERS_MID=${ITERS_MID:-50}
ITERS_LARGE=${ITERS_LARGE:-20}
RUN_TIMEOUT=${RUN_TIMEOUT:-90}
REPEAT=${REPEAT:-1}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d /tmp/seed002.XXXXXX)
ns_s=gorxe-s002-srv-$$
ns_c=gorxe-s002-cli-$$

cleanup() {
	ip netns pids "$ns_s" 2>/dev/null | xargs -r kill 2>/dev/null || true
	ip netns pids "$ns_c" 2>/dev/null | xargs -r kill 2>/dev/null || true
	ip netns del "$ns_s" 2>/dev/null || true
	ip netns del "$ns_c" 2>/dev/null || true
	if [[ ${KEEP:-0} == 1 ]]; then echo "raw results kept in $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "building rxectl..." >&2
(cd "$root" && go build -o "$tmp/rxectl" ./cmd/rxectl)

ip netns add "$ns_s"
ip netns add "$ns_c"
ip link add veth-s netns "$ns_s" type veth peer name veth-c netns "$ns_c"
ip -n "$ns_s" addr add 10.99.0.1/24 dev veth-s
ip -n "$ns_c" addr add 10.99.0.2/24 dev veth-c
for n in "$ns_s" "$ns_c"; do ip -n "$n" link set lo up; done
ip -n "$ns_s" link set veth-s mtu "$VETH_MTU" up
ip -n "$ns_c" link set veth-c mtu "$VETH_MTU" up
# The responder's egress: READ responses leave through this qdisc.
tc -n "$ns_s" qdisc add dev veth-s root tbf rate "$RATE" burst "$BURST" limit "$LIMIT"
echo "qdisc: $(tc -n "$ns_s" qdisc show dev veth-s)" >&2

sizes=()
if ((quick)); then
	sizes=(2 65536 1048576 2097152 4194304 8388608)
else
	for ((s = 2; s <= 8388608; s *= 2)); do sizes+=("$s"); done
fi
iters_for() {
	if (($1 <= 65536)); then echo "$ITERS_SMALL"; elif (($1 <= 1048576)); then echo "$ITERS_MID"; else echo "$ITERS_LARGE"; fi
}

# one MODE SIZE ROUND: one server and one client run; with k=MODE.SIZE.rROUND,
# BW average to $tmp/bw.k, CPU "user sys" of each process to $tmp/cpu.{srv,cli}.k,
# JSON to $tmp/{srv,cli}.k.json.
one() {
	local mode=$1 size=$2 n
	local k=$mode.$size.r$3
	n=$(iters_for "$size")
	local args=(read-bw --local-drop-mode="$mode" -s "$size" -n "$n" --json)
	# shellcheck disable=SC2206 # ARGS is split into flags on purpose
	args+=(${ARGS:-})
	ip netns exec "$ns_s" timeout "$RUN_TIMEOUT" /usr/bin/time -f "%U %S" -o "$tmp/cpu.srv.$k" \
		"$tmp/rxectl" "${args[@]}" >"$tmp/srv.$k.json" 2>"$tmp/srv.$k.err" &
	local spid=$! ok=0
	for _ in $(seq 100); do
		# The server listens on TCP 18515 (rxectl's out-of-band exchange).
		if ip netns exec "$ns_c" timeout "$RUN_TIMEOUT" /usr/bin/time -f "%U %S" -o "$tmp/cpu.cli.$k" \
			"$tmp/rxectl" "${args[@]}" 10.99.0.1 >"$tmp/cli.$k.json" 2>"$tmp/cli.$k.err"; then
			ok=1
			break
		fi
		grep -q "connection refused" "$tmp/cli.$k.err" || break
		sleep 0.05
	done
	wait "$spid" || true
	if ((ok)); then
		sed -n 's/.*"bw_average": *\([0-9.eE+-]*\).*/\1/p' "$tmp/cli.$k.json" | head -1 >"$tmp/bw.$k"
	else
		echo "FAIL" >"$tmp/bw.$k"
		local why
		why=$(tail -1 "$tmp/cli.$k.err")
		echo "  $mode $size: client failed: ${why:-killed after RUN_TIMEOUT=$RUN_TIMEOUT s}" >&2
	fi
}

# counter KEY FILE: the first "KEY": N in a JSON file (the side's own device/transport).
counter() { sed -n "s/.*\"$1\": *\([0-9]*\).*/\1/p" "$2" 2>/dev/null | head -1; }

# qdisc_drops: the tbf's "dropped" count so far (every datagram it refused).
qdisc_drops() { tc -s -n "$ns_s" qdisc show dev veth-s | sed -n 's/.*dropped \([0-9]*\).*/\1/p' | head -1; }

start=$(date +%s)
for m in $MODES; do echo 0 >"$tmp/qdrops.$m"; done
for ((r = 1; r <= REPEAT; r++)); do
	for mode in $MODES; do
		d0=$(qdisc_drops)
		for size in "${sizes[@]}"; do
			one "$mode" "$size" "$r"
			k=$mode.$size.r$r
			echo "  round $r $mode $size B x $(iters_for "$size"): $(cat "$tmp/bw.$k") MiB/s, server CPU $(tail -1 "$tmp/cpu.srv.$k" 2>/dev/null) (user sys), server local drops $(counter local_drops "$tmp/srv.$k.json"), back-off delay $(counter backoff_delay_ns "$tmp/srv.$k.json") ns" >&2
		done
		echo $(($(<"$tmp/qdrops.$mode") + $(qdisc_drops) - d0)) >"$tmp/qdrops.$mode"
	done
done

# median MODE SIZE: the median BW over the rounds that did not fail, with
# the number of failed rounds after it; FAIL if every round failed.
median() {
	local f=0 v=()
	for x in $(cat "$tmp"/bw."$1"."$2".r*); do
		if [[ $x == FAIL ]]; then f=$((f + 1)); else v+=("$x"); fi
	done
	if ((${#v[@]} == 0)); then echo FAIL; return; fi
	printf '%s\n' "${v[@]}" | sort -g | awk -v f="$f" '{a[NR] = $1} END {
		m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
		printf "%.2f", m; if (f) printf " (%d FAIL)", f }'
}

cpu_sum() { # ROLE MODE
	cat "$tmp"/cpu."$1"."$2".* 2>/dev/null | awk '/^[0-9.]+ [0-9.]+$/ {u += $1; s += $2} END {printf "%.2f", u + s}'
}
sum_counter() { # KEY ROLE MODE
	local t=0 v f
	for f in "$tmp"/"$2"."$3".*.json; do v=$(counter "$1" "$f"); t=$((t + ${v:-0})); done
	echo "$t"
}

echo
echo "rxectl read-bw${ARGS:+ $ARGS}, veth pair (MTU $VETH_MTU) between two namespaces, \`tbf rate $RATE burst $BURST limit $LIMIT\` on the server's egress;"
echo "-n $ITERS_SMALL up to 64 KiB, $ITERS_MID for 128 KiB..1 MiB, $ITERS_LARGE for 2..8 MiB; $REPEAT round(s), BW = median over the rounds; $(($(date +%s) - start)) s in all."
echo
printf '| #bytes |'; for m in $MODES; do printf ' BW average %s [MiB/s] |' "$m"; done; echo
printf '|---:|'; for m in $MODES; do printf -- '---:|'; done; echo
for size in "${sizes[@]}"; do
	printf '| %s |' "$size"
	for m in $MODES; do printf ' %s |' "$(median "$m" "$size")"; done
	echo
done
echo
echo "| mode | server CPU s | client CPU s | qdisc drops | server local drops | server drop retries | client retransmits | client timeouts |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for m in $MODES; do
	echo "| $m | $(cpu_sum srv "$m") | $(cpu_sum cli "$m") | $(cat "$tmp/qdrops.$m") | $(sum_counter local_drops srv "$m") | $(sum_counter local_drop_retries srv "$m") | $(sum_counter retransmits cli "$m") | $(sum_counter timeouts cli "$m") |"
done

# The issue's targets: BW(8 MiB) against BW(1 MiB) and against the tbf rate.
rate_mib=$(echo "$RATE" | awk '{
	v = $0 + 0; u = tolower($0); sub(/^[0-9.]+/, "", u)
	f = (u == "gbit") ? 1e9 : (u == "mbit") ? 1e6 : (u == "kbit") ? 1e3 : (u == "bit") ? 1 : 0
	if (f) printf "%.2f", v * f / 8 / 1048576 }')
echo
for m in $MODES; do
	b1=$(median "$m" 1048576)
	b8=$(median "$m" 8388608)
	if [[ $b1 =~ ^[0-9.]+$ && $b8 =~ ^[0-9.]+$ ]]; then
		echo "- $m: BW(8 MiB)/BW(1 MiB) = $(awk -v a="$b8" -v b="$b1" 'BEGIN {printf "%.3f", a / b}')${rate_mib:+, BW(8 MiB)/tbf rate ($rate_mib MiB/s) = $(awk -v a="$b8" -v b="$rate_mib" 'BEGIN {printf "%.3f", a / b}')}"
	else
		echo "- $m: BW(1 MiB) $b1, BW(8 MiB) $b8"
	fi
done
