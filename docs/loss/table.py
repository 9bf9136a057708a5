"""Turns the JSON lines of docs/loss/sweep.sh into the markdown tables of
docs/performance.md ("Loss"): one table per direction of loss, one row per
operation, size and selective-repeat mode, one cell per loss rate:
goodput as a ratio to the loss-free run of the same operation, size and
mode in the same sweep, packets resent per packet lost, and recovery timer
/ IB ACK timeout expiries. A cell that misses a target of issue 13 is
marked ✗.

Resent = packets both devices sent, minus what the loss-free run of the
same mode needed for as many iterations, minus the hole reports (control
packets, not data sent again); lost = datagrams the fault injector
dropped. Targets: selective repeat on: ratio ≥ 0.9 / 0.8 / 0.75 / 0.6 at
0.1 / 1 / 2 / 5 %, resent ≤ 1.5 × lost, no IB timeout at ≤ 2 %; off: ratio
≥ 0.5 at 1 % and ≥ 0.3 at 5 %.

usage: python3 docs/loss/table.py < runs.jsonl"""
import json
import sys

SR_TARGET = {0.001: 0.9, 0.01: 0.8, 0.02: 0.75, 0.05: 0.6}
OFF_TARGET = {0.01: 0.5, 0.05: 0.3}


def cell(r, b):
    """Returns the cell text and the list of missed targets."""
    ratio = r["bw"] / b["bw"] if b["bw"] else 0
    need = b["sent"] / b["iters"] * r["iters"] if b["iters"] else 0
    resent = max(r["sent"] - need - r.get("holes_reported", 0), 0)
    per = resent / r["lost"] if r["lost"] else 0
    missed = []
    if r["mode"] == "on":
        if ratio < SR_TARGET.get(r["p"], 0):
            missed.append("goodput")
        if r["lost"] and per > 1.5:
            missed.append("resent")
        if r["p"] <= 0.02 and r["ib"] > 0:
            missed.append("ib")
    elif ratio < OFF_TARGET.get(r["p"], 0):
        missed.append("goodput")
    mark = " ✗" if missed else ""
    return f"{ratio:.2f} ({per:.1f}×, {r['rto']}/{r['ib']}){mark}", missed


def main():
    runs = [json.loads(l) for l in sys.stdin if l.strip().startswith("{")]
    base = {(r["op"], r["size"], r["mode"]): r for r in runs if r["p"] == 0 and not r.get("failed")}
    ps = sorted({r["p"] for r in runs if r["p"] > 0})
    dirs = [d for d in ("req", "resp") if any(r.get("dir") == d for r in runs)]
    missed_total, cells_total = {}, 0
    for d in dirs:
        print(f"Loss on {'requests (what the client sends)' if d == 'req' else 'responses (what the client receives)'}:")
        print()
        print("| op | size | SR | MiB/s at p=0 | " + " | ".join(f"{p:.1%}" for p in ps) + " |")
        print("|---|---|---|---|" + "---|" * len(ps))
        keys = sorted(base, key=lambda k: (k[0], k[1], k[2] != "on"))
        for op, size, mode in keys:
            b = base[(op, size, mode)]
            cells = []
            for p in ps:
                r = next((x for x in runs if (x["op"], x["size"], x["mode"], x["p"], x.get("dir")) == (op, size, mode, p, d)), None)
                if r is None or r.get("failed"):
                    cells.append("failed ✗")
                    missed_total[(mode, "failed")] = missed_total.get((mode, "failed"), 0) + 1
                    continue
                text, missed = cell(r, b)
                cells_total += 1
                for m in missed:
                    missed_total[(mode, m)] = missed_total.get((mode, m), 0) + 1
                cells.append(text)
            sz = "64 KiB" if size == 65536 else "1 MiB"
            print(f"| {op.upper()} | {sz} | {mode} | {b['bw']:.0f} | " + " | ".join(cells) + " |")
        print()
    for (op, size, mode) in sorted({(r["op"], r["size"], r["mode"]) for r in runs}):
        if (op, size, mode) not in base:
            print(f"(no loss-free base for {op} {size} {mode}: its row is missing)")
    print("Cell: goodput ratio to p=0 of the same mode (resent packets per lost packet, "
          "recovery timer expiries/IB ACK timeouts); ✗: a target missed.")
    print()
    print("Targets missed: " + (", ".join(f"{m} {k}: {n}" for (m, k), n in sorted(missed_total.items())) or "none")
          + f" (of {cells_total} cells).")


main()
