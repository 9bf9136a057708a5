#!/bin/sh
# The bound of docs/performance.md, "The ICRC in four chains, and what the
# copies and the CRC cost": COMMIT with docs/skipwork.patch applied (switches
# that skip the payload copies or the ICRC; not a correct device, never on
# main), its in-process 64 KiB benchmarks run with each variant's switches
# in alternating rounds (order reversed in even rounds), under the bench
# lock, then medians per benchmark and variant. From the repository root:
#   docs/skipwork.sh ROUNDS [COMMIT]    (COMMIT defaults to c4c3208)
# Variants: none; S (send copy skipped); R (receive copy); SR; T (send copy
# replaced by a read of each cache line of the MR); C (ICRC); SRC.
# Raw lines go to $OUT (default /tmp/skipwork.txt).
set -eu
ROUNDS=${1:?usage: $0 ROUNDS [COMMIT]}
COMMIT=${2:-c4c3208}
OUT=${OUT:-/tmp/skipwork.txt}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
. docs/ablib.sh
git archive "$COMMIT" | tar -x -C "$W"
(cd "$W" && patch -p1 -s <"$OLDPWD/docs/skipwork.patch" && go test -c -o "$W/rxe.test" ./rxe)
env_of() {
	case $1 in
	none) echo "" ;;
	S) echo "GORXE_X_NOSEND=1" ;;
	R) echo "GORXE_X_NORECV=1" ;;
	SR) echo "GORXE_X_NOSEND=1 GORXE_X_NORECV=1" ;;
	T) echo "GORXE_X_NOSEND=1 GORXE_X_TOUCH=1" ;;
	C) echo "GORXE_X_NOCRC=1" ;;
	SRC) echo "GORXE_X_NOSEND=1 GORXE_X_NORECV=1 GORXE_X_NOCRC=1" ;;
	esac
}
: >"$OUT"
r=1
while [ "$r" -le "$ROUNDS" ]; do
	for v in $(ab_order "$r" none S R SR T C SRC); do
		ab_bench64k "$r" "$v" "$W/rxe.test" $(env_of "$v") >>"$OUT"
	done
	r=$((r + 1))
done
python3 docs/bench64k-table.py "$OUT"
