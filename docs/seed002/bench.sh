#!/usr/bin/env bash
# Seed 002 reproduction: rxectl read-bw across a veth pair whose responder side
# has a tbf qdisc small enough that the kernel refuses sends (ENOBUFS), once per
# --read-retry mode (adaptive, timeout, spin). Prints a markdown table of BW
# average per message size and the CPU seconds each mode cost. See docs/seed002.md.
#
# Usage (from anywhere in the repository, as root):
#   docs/seed002/bench.sh [-q]        # -q: sizes 2 B, 64 KiB, 1..8 MiB only
# Environment: MODES (default "adaptive timeout spin"), RATE (default 1gbit),
#   ITERS_SMALL (≤ 64 KiB, default 200), ITERS_MID (128 KiB..1 MiB, default 50),
#   ITERS_LARGE (2..8 MiB, default 20), RUN_TIMEOUT (seconds per size, default 90),
#   KEEP=1 keeps the raw JSON in the temporary directory.
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
ITERS_SMALL=${ITERS_SMALL:-200}
ITERS_MID=${ITERS_MID:-50}
ITERS_LARGE=${ITERS_LARGE:-20}
RUN_TIMEOUT=${RUN_TIMEOUT:-90}

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
ip -n "$ns_s" link set veth-s up
ip -n "$ns_c" link set veth-c up
# The responder's egress: READ responses leave through this qdisc.
tc -n "$ns_s" qdisc add dev veth-s root tbf rate "$RATE" burst 64kb limit 32kb
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

# one MODE SIZE: one server and one client run; BW average to $tmp/bw.MODE.SIZE,
# CPU "user sys" of each process to $tmp/cpu.{srv,cli}.MODE.SIZE.
one() {
	local mode=$1 size=$2 n
	n=$(iters_for "$size")
	local args=(read-bw --read-retry="$mode" -s "$size" -n "$n" --json)
	ip netns exec "$ns_s" timeout "$RUN_TIMEOUT" /usr/bin/time -f "%U %S" -o "$tmp/cpu.srv.$mode.$size" \
		"$tmp/rxectl" "${args[@]}" >"$tmp/srv.$mode.$size.json" 2>"$tmp/srv.$mode.$size.err" &
	local spid=$! ok=0
	for _ in $(seq 100); do
		# The server listens on TCP 18515 (rxectl's out-of-band exchange).
		if ip netns exec "$ns_c" timeout "$RUN_TIMEOUT" /usr/bin/time -f "%U %S" -o "$tmp/cpu.cli.$mode.$size" \
			"$tmp/rxectl" "${args[@]}" 10.99.0.1 >"$tmp/cli.$mode.$size.json" 2>"$tmp/cli.$mode.$size.err"; then
			ok=1
			break
		fi
		grep -q "connection refused" "$tmp/cli.$mode.$size.err" || break
		sleep 0.05
	done
	wait "$spid" || true
	if ((ok)); then
		sed -n 's/.*"bw_average": *\([0-9.eE+-]*\).*/\1/p' "$tmp/cli.$mode.$size.json" | head -1 >"$tmp/bw.$mode.$size"
	else
		echo "FAIL" >"$tmp/bw.$mode.$size"
		echo "  $mode $size: client failed: $(tail -1 "$tmp/cli.$mode.$size.err")" >&2
	fi
}

# counter KEY FILE: the first "KEY": N in a JSON file (the side's own device/transport).
counter() { sed -n "s/.*\"$1\": *\([0-9]*\).*/\1/p" "$2" 2>/dev/null | head -1; }

start=$(date +%s)
for mode in $MODES; do
	for size in "${sizes[@]}"; do
		one "$mode" "$size"
		echo "  $mode $size B x $(iters_for "$size"): $(cat "$tmp/bw.$mode.$size") MiB/s, server CPU $(tail -1 "$tmp/cpu.srv.$mode.$size" 2>/dev/null) (user sys)" >&2
	done
done

fmt2() { if [[ $1 =~ ^[0-9.eE+-]+$ ]]; then printf '%.2f' "$1"; else printf '%s' "$1"; fi; }
cpu_sum() { # ROLE MODE
	cat "$tmp"/cpu."$1"."$2".* 2>/dev/null | awk '/^[0-9.]+ [0-9.]+$/ {u += $1; s += $2} END {printf "%.2f", u + s}'
}
sum_counter() { # KEY ROLE MODE
	local t=0 v f
	for f in "$tmp"/"$2"."$3".*.json; do v=$(counter "$1" "$f"); t=$((t + ${v:-0})); done
	echo "$t"
}

echo
echo "rxectl read-bw, veth pair between two namespaces, \`tbf rate $RATE burst 64kb limit 32kb\` on the server's egress;"
echo "-n $ITERS_SMALL up to 64 KiB, $ITERS_MID for 128 KiB..1 MiB, $ITERS_LARGE for 2..8 MiB; $(($(date +%s) - start)) s in all."
echo
printf '| #bytes |'; for m in $MODES; do printf ' BW average %s [MiB/s] |' "$m"; done; echo
printf '|---:|'; for m in $MODES; do printf -- '---:|'; done; echo
for size in "${sizes[@]}"; do
	printf '| %s |' "$size"
	for m in $MODES; do printf ' %s |' "$(fmt2 "$(cat "$tmp/bw.$m.$size")")"; done
	echo
done
echo
echo "| mode | server CPU s | client CPU s | server local drops | client retransmits | client timeouts |"
echo "|---|---:|---:|---:|---:|---:|"
for m in $MODES; do
	echo "| $m | $(cpu_sum srv "$m") | $(cpu_sum cli "$m") | $(sum_counter local_drops srv "$m") | $(sum_counter retransmits cli "$m") | $(sum_counter timeouts cli "$m") |"
done
