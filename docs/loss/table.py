"""Turns the JSON lines of docs/loss/sweep.sh into the markdown table of
docs/performance.md ("Loss"): per operation, size and recovery mode,
goodput as a ratio to the loss-free run of the same mode in the same
sweep, packets sent again per packet lost, and recovery timer and IB ACK
timeout expiries.

Packets sent again = packets both devices sent, minus what the loss-free
run of the same mode needed for as many iterations; lost = datagrams the
fault injector dropped (both directions)."""
import json
import sys

runs = [json.loads(l) for l in sys.stdin if l.strip().startswith("{")]
base = {(r["op"], r["size"], r["mode"]): r for r in runs if r.get("p") == 0 and not r.get("failed")}
ps = sorted({r["p"] for r in runs if r["p"] > 0})
print("| op | size | recovery | MiB/s at p=0 | " + " | ".join(f"{p:.1%}" for p in ps) + " |")
print("|---|---|---|---|" + "---|" * len(ps))
for (op, size, mode), b in sorted(base.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] != "on")):
    cells = []
    for p in ps:
        r = next((x for x in runs if (x["op"], x["size"], x["mode"], x["p"]) == (op, size, mode, p)), None)
        if r is None or r.get("failed"):
            cells.append("failed")
            continue
        ratio = r["bw"] / b["bw"] if b["bw"] else 0
        need = b["sent"] / b["iters"] * r["iters"] if b["iters"] else 0
        resent = max(r["sent"] - need, 0)
        per = resent / r["lost"] if r["lost"] else 0
        cells.append(f"{ratio:.2f} ({per:.1f}×, {r['rto']}/{r['ib']})")
    sz = "64 KiB" if size == 65536 else "1 MiB"
    print(f"| {op.upper()} | {sz} | {mode} | {b['bw']:.0f} | " + " | ".join(cells) + " |")
print()
print("Cell: goodput ratio to p=0 (resent packets per lost packet, recovery timer expiries/IB ACK timeouts).")
