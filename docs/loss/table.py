"""Turns the JSON lines of docs/loss/sweep.sh into the markdown tables of
docs/performance.md ("Loss"): one table per direction of loss, one row per
operation, size and selective-repeat mode, one cell per loss rate:
goodput as a ratio to the loss-free run of the same operation, size and
mode in the same sweep, packets resent per packet lost, and recovery timer
/ IB ACK timeout expiries. A cell that misses a target of issue 13 is
marked ✗.

Resent: for WRITE and SEND, the request packets the client's requester
sent again (its retransmission counter: resends, probes); for READ, also
the READ response packets the server sent again for duplicate READs (its
read_responses_resent counter). With loss on responses, the READ requests
that ask for a lost response again are repair requests, as the hole
reports of WRITE and SEND are, not resends of anything lost: they are
shown apart in the cell ("+ n rq", per lost packet) and not counted in the
resent target. Runs recorded before that counter existed fall back to the
server's packets minus its hole reports, the iterations' response packets
and what the loss-free run sent beyond those (the READs in flight when a
-D run stops), with every requester retransmission counted. Lost: datagrams the fault
injector dropped. Targets: selective repeat on: ratio ≥ 0.9 / 0.8 / 0.75 / 0.6 at
0.1 / 1 / 2 / 5 %, resent ≤ 1.5 × lost, no IB timeout at ≤ 2 %; off: ratio
≥ 0.5 at 1 % and ≥ 0.3 at 5 %.

Several sweeps may be concatenated: each cell and each loss-free base then
uses the median goodput of the repeats of its point (the counters are
those of the run closest to it), and the cell shows the range of ratios.

Runs of a sweep with PAIRED=1 carry a "pair" number shared with a
loss-free run of the same operation, size and mode made just before them
("dir": "base"): a cell's ratio is then the median of each lossy run's
goodput over its own base's (the run of its pair number just before it:
concatenated sweeps repeat the numbers), and its range the range of those ratios; the
p=0 column shows the median of all loss-free runs of the row.

usage: cat runs*.jsonl | python3 docs/loss/table.py"""
import json
import statistics
import sys
from collections import defaultdict

SR_TARGET = {0.001: 0.9, 0.01: 0.8, 0.02: 0.75, 0.05: 0.6}
OFF_TARGET = {0.01: 0.5, 0.05: 0.3}


def median_run(rs):
    """Returns the run closest to the median goodput of rs, with its bw
    replaced by that median (the mean of the middle two of an even
    number), so that ratios are ratios of medians."""
    m = statistics.median(r["bw"] for r in rs)
    r = dict(min(rs, key=lambda r: abs(r["bw"] - m)))
    r["bw"] = m
    return r


def repair_requests(r):
    """Returns the READ requests of run r that asked for lost responses
    again (loss on responses), 0 for any other run."""
    if r["op"] == "read" and r.get("dir") == "resp" and "read_resent" in r:
        return r["retransmits"]
    return 0


def resent(r, b):
    """Returns the packets sent again in run r (b: the loss-free base)."""
    n = r["retransmits"] - repair_requests(r)
    if r["op"] == "read" and "read_resent" in r:
        return n + r["read_resent"]
    if r["op"] == "read" and "server_sent" in r and "server_sent" in b:
        ppm = -(-r["size"] // 4096)
        over = b["server_sent"] - b.get("server_holes", 0) - b["iters"] * ppm
        n += max(r["server_sent"] - r.get("server_holes", 0) - r["iters"] * ppm - over, 0)
    return n


def cell(r, b, rs, pairs):
    """Returns the cell text and the list of missed targets: r is the
    median run of the point, rs all its runs, b the median base, pairs
    the paired loss-free runs by the index of the lossy run they pair
    (PAIRED sweeps, main)."""
    ratio = r["bw"] / b["bw"] if b["bw"] else 0
    paired = [x["bw"] / pairs[x["pair_key"]]["bw"] for x in rs
              if x.get("pair_key") in pairs and pairs[x["pair_key"]]["bw"]]
    if paired and len(paired) == len(rs):
        ratio = statistics.median(paired)
    resent_n = resent(r, b)
    per = resent_n / r["lost"] if r["lost"] else 0
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
    spread = ""
    if paired and len(paired) == len(rs):
        if len(paired) > 1:
            spread = f" [{min(paired):.2f}–{max(paired):.2f}]"
    elif len(rs) > 1:
        lo, hi = min(x["bw"] for x in rs) / b["bw"], max(x["bw"] for x in rs) / b["bw"]
        spread = f" [{lo:.2f}–{hi:.2f}]"
    rq = ""
    if repair_requests(r) and r["lost"]:
        rq = f" + {repair_requests(r) / r['lost']:.1f} rq"
    return f"{ratio:.2f}{spread} ({per:.1f}×{rq}, {r['rto']}/{r['ib']}){mark}", missed


def main():
    runs = [json.loads(l) for l in sys.stdin if l.strip().startswith("{")]
    groups = defaultdict(list)
    for r in runs:
        if not r.get("failed"):
            groups[(r["op"], r["size"], r["mode"], r["p"], r.get("dir"))].append(r)
    # Each lossy run's base is the run of its pair number that came just
    # before it: every sweep numbers its pairs from 1 again, so sweeps
    # concatenated repeat the numbers.
    pairs, last = {}, {}
    for i, r in enumerate(runs):
        if r.get("failed") or "pair" not in r:
            continue
        if r.get("dir") == "base":
            last[r["pair"]] = r
        elif r["pair"] in last:
            pairs[i] = last.pop(r["pair"])
            r["pair_key"] = i
    zero = defaultdict(list)
    for (op, size, mode, p, _), rs in groups.items():
        if p == 0:
            zero[(op, size, mode)].extend(rs)
    base = {k: median_run(rs) for k, rs in zero.items()}
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
                rs = groups.get((op, size, mode, p, d))
                r = median_run(rs) if rs else None
                if r is None:
                    cells.append("failed ✗")
                    missed_total[(mode, "failed")] = missed_total.get((mode, "failed"), 0) + 1
                    continue
                text, missed = cell(r, b, rs, pairs)
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
    print(("Cell: goodput ratio to the loss-free run paired with each lossy run, median of the repeats [their range] "
           if pairs else "Cell: goodput ratio to p=0 of the same mode, median of the repeats [their range] ")
          + "(resent packets per lost packet [+ READ repair requests per lost packet], recovery timer expiries/IB ACK timeouts); ✗: a target missed.")
    print()
    print("Targets missed: " + (", ".join(f"{m} {k}: {n}" for (m, k), n in sorted(missed_total.items())) or "none")
          + f" (of {cells_total} cells).")


main()
