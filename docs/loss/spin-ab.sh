#!/bin/sh
# The receive spin (rxe.Options.ReceiveSpin) on and off in alternating
# rounds of one rxectl binary: loopback WRITE, READ and SEND at 64 KiB and
# 1 MiB, loss-free (selective repeat on) and, with LOSSY=1, 1 % loss on
# the client's datagrams (--drop 0.01,dir=send --seed 11) with selective
# repeat on and off. Each run is `rxectl OP-bw --loopback -s SIZE -D 2`,
# once with --receive-spin 0 and once with the default, their order
# swapped every other round, under flock /tmp/gorxe-bench.lock. Prints one
# JSON line per run (round, op, size, drop, sr, spin, MiB/s, CPU seconds)
# and, at the end, per cell the median MiB/s of each and the median of the
# per-round ratios on/off.
#
# usage: docs/loss/spin-ab.sh ROUNDS RXECTL
# Environment: OPS ("write read send"), SIZES ("65536 1048576"), LOSSY (0).
set -eu
ROUNDS=$1 RXECTL=$2
out=$(mktemp)
trap 'rm -f "$out" "$out.time"' EXIT
exec 9>/tmp/gorxe-bench.lock
flock 9
for i in $(seq 1 "$ROUNDS"); do
	for op in ${OPS:-write read send}; do
		for size in ${SIZES:-65536 1048576}; do
			cells="none,on"
			[ "${LOSSY:-0}" = 1 ] && cells="$cells 0.01,on 0.01,off"
			for cell in $cells; do
				drop=${cell%,*} sr=${cell#*,}
				order="0 default"
				[ $((i % 2)) = 0 ] && order="default 0"
				for spin in $order; do
					set -- "$op-bw" --loopback -s "$size" -D 2 --selective-repeat "$sr" --json
					[ "$drop" != none ] && set -- "$@" --drop "$drop,dir=send" --seed 11
					[ "$spin" = 0 ] && set -- "$@" --receive-spin 0
					/usr/bin/time -f "%U %S" -o "$out.time" "$RXECTL" "$@" 2>/dev/null |
						python3 -c 'import json, sys
d = json.load(sys.stdin)
u, s = open(sys.argv[1]).read().split()
print(json.dumps({"round": int(sys.argv[2]), "op": sys.argv[3], "size": int(sys.argv[4]), "drop": sys.argv[5],
	"sr": sys.argv[6], "spin": sys.argv[7], "bw": d["results"][0]["bw_average"], "cpu": float(u) + float(s)}))' \
						"$out.time" "$i" "$op" "$size" "$drop" "$sr" "$spin" | tee -a "$out"
				done
			done
		done
	done
done
python3 -c 'import json, statistics as st, sys
from collections import defaultdict
runs = defaultdict(dict)
for l in open(sys.argv[1]):
	r = json.loads(l)
	runs[(r["op"], r["size"], r["drop"], r["sr"])].setdefault(r["round"], {})[r["spin"]] = r["bw"]
for k in sorted(runs):
	rs = [v for v in runs[k].values() if len(v) == 2]
	off, on = [v["0"] for v in rs], [v["default"] for v in rs]
	print("# %s %d drop=%s sr=%s: off %.0f, on %.0f MiB/s, on/off %.3f (%s)" % (k[0], k[1], k[2], k[3], st.median(off), st.median(on),
		st.median([b / a for a, b in zip(off, on)]), " ".join("%.2f" % (b / a) for a, b in zip(off, on))))' "$out"
