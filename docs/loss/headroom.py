"""Selective repeat with processor headroom (issue 13): is a missed
goodput cell bound by the recovery or by the two processors?

For each operation, size and loss rate on requests, and each round, four
runs of `rxectl X-bw --loopback -D DUR --seed 11 --selective-repeat on`,
one after the other: loss-free and lossy without a limit (as
docs/loss/sweep.sh runs them), then loss-free and lossy paced by rxectl's
software rate limiter to LIMIT MiB/s (`--rate_limit LIMIT --rate_units M
--burst_size B`), a rate below what the loss-free run reaches, so that
the processors are no longer full. Each run's processor time (user +
system, from the child's rusage) is recorded with its goodput, so the
lossy stream's processor time per MiB can be compared with the loss-free
one's.

Prints one JSON line per run; `python3 docs/loss/headroom.py --table`
reads them back and prints, per cell, the medians of the unpaced and
paced goodput ratios (lossy over the loss-free run just before it), of
the processor time per GiB of both runs, and of each pair's lossy over
loss-free processor time per GiB. Processor time is the whole process's
(both ends), and per GiB divides by the goodput times the duration, so
the setup before the timed part counts too.

usage: python3 docs/loss/headroom.py RXECTL ROUNDS [DUR] > runs.jsonl
       python3 docs/loss/headroom.py --table < runs.jsonl
Environment: OPS ("write send"), SIZES ("65536 1048576"),
PS ("0.001 0.01 0.02"), LIMIT (MiB/s, 1600), BURST64K (128), BURST1M (32); smaller bursts
fall further below the limit: a burst that starts late (Go timers are
late by tens of µs here) is not caught up, as in perftest.
"""
import json
import os
import statistics
import subprocess
import sys


def run(rxectl, op, size, dur, p, limit):
    args = [rxectl, op + "-bw", "--loopback", "-s", str(size), "-D", str(dur),
            "--seed", "11", "--selective-repeat", "on", "--json"]
    if p:
        args += ["--drop", "%g,dir=send" % p]
    if limit:
        burst = os.environ.get("BURST64K", "128") if size < 1 << 20 else os.environ.get("BURST1M", "32")
        args += ["--rate_limit", str(limit), "--rate_units", "M", "--burst_size", burst]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate()
    # communicate reaped the child; its rusage is the only child's since the last call.
    line = {"op": op, "size": size, "p": p, "limit": limit, "cmd": " ".join(args[1:])}
    ru = resource_delta()
    line["cpu_s"] = round(ru, 3)
    if proc.returncode != 0:
        line["failed"] = True
        line["error"] = err.decode(errors="replace").strip()[-300:]
        return line
    d = json.loads(out)
    r = d["results"][0]
    t, pt = d["transport"], d["peer_transport"]
    f = d.get("faults") or {"send": {"dropped": 0}, "recv": {"dropped": 0}}
    line.update({
        "bw": r["bw_average"], "unit": d["unit"],
        "lost": f["send"]["dropped"] + f["recv"]["dropped"],
        "resent": t.get("sr_packets_resent", 0) + pt.get("sr_packets_resent", 0),
        "rto": t.get("rto_expiries", 0) + pt.get("rto_expiries", 0),
        "ib": t.get("ib_timeouts", 0) + pt.get("ib_timeouts", 0),
        "sr_used": d.get("selective_repeat_used", False),
    })
    return line


_last = [0.0]


def resource_delta():
    import resource
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = ru.ru_utime + ru.ru_stime
    d = total - _last[0]
    _last[0] = total
    return d


def table():
    cells = {}
    for raw in sys.stdin:
        x = json.loads(raw)
        cells.setdefault((x["op"], x["size"]), []).append(x)
    print("| op | size | p | ratio unpaced | ratio paced | MiB/s unpaced (loss-free, lossy) | MiB/s paced (loss-free, lossy) | CPU s per GiB unpaced (loss-free, lossy) | CPU s per GiB paced (loss-free, lossy) | lossy / loss-free CPU per GiB, unpaced | the same, paced | failed |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (op, size), runs in sorted(cells.items()):
        ps = sorted({x["p"] for x in runs if x["p"]})
        for p in ps:
            row = {}
            cost = {}  # limit: the pairs' lossy over loss-free processor time per GiB
            failed = 0
            for limit in sorted({x["limit"] for x in runs}):
                ratios, bws, cpus = [], ([], []), ([], [])
                seq = [x for x in runs if x["limit"] == limit and x["p"] in (0, p)]
                # Pairs: a loss-free run directly followed by the lossy run at p.
                for a, b in zip(seq, seq[1:]):
                    if a["p"] != 0 or b["p"] != p or a.get("pair") != b.get("pair"):
                        continue
                    if a.get("failed") or b.get("failed"):
                        failed += 1
                        continue
                    ratios.append(b["bw"] / a["bw"])
                    for i, x in enumerate((a, b)):
                        bws[i].append(x["bw"])
                        cpus[i].append(x["cpu_s"] / (x["bw"] * x["dur"] / 1024))
                    cost.setdefault(limit, []).append(cpus[1][-1] / cpus[0][-1])
                row[limit] = (ratios, bws, cpus)

            def med(v):
                return statistics.median(v) if v else float("nan")
            cols = []
            for limit in sorted(row):
                ratios, bws, cpus = row[limit]
                cols.append(("%.2f [%.2f–%.2f]" % (med(ratios), min(ratios), max(ratios))) if ratios else "—")
            for limit in sorted(row):
                ratios, bws, cpus = row[limit]
                cols.append("%.0f, %.0f" % (med(bws[0]), med(bws[1])))
            for limit in sorted(row):
                ratios, bws, cpus = row[limit]
                cols.append("%.2f, %.2f" % (med(cpus[0]), med(cpus[1])))
            for limit in sorted(row):
                cols.append("%.2f" % med(cost.get(limit, [])))
            order = cols
            print("| %s | %s | %g %% | %s | %d |" % (op, "1 MiB" if size == 1 << 20 else "64 KiB", p * 100, " | ".join(order), failed))


def main():
    if sys.argv[1:] == ["--table"]:
        table()
        return
    rxectl, rounds = sys.argv[1], int(sys.argv[2])
    dur = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    limit = int(os.environ.get("LIMIT", "1600"))
    pair = 0
    resource_delta()
    for _ in range(rounds):
        for op in os.environ.get("OPS", "write send").split():
            for size in [int(s) for s in os.environ.get("SIZES", "65536 1048576").split()]:
                for p in [float(s) for s in os.environ.get("PS", "0.001 0.01 0.02").split()]:
                    for lim in (0, limit):
                        pair += 1
                        for q in (0, p):
                            line = run(rxectl, op, size, dur, q, lim)
                            line["pair"], line["dur"] = pair, dur
                            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
