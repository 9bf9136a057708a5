"""Reduces one rxectl --json document of docs/loss/sweep.sh to one JSON
line: goodput, iterations, packets lost (dropped by the fault injector, both
directions), packets each device sent (the client is the requester, the
server the responder), and the recovery and selective-repeat counters of
both ends.

With PAIR in the environment (sweep.sh's PAIRED), the line carries it as
"pair": the loss-free base and the lossy run it belongs to share it.

usage: rxectl X-bw --loopback ... --json | python3 run.py OP SIZE P DIR MODE"""
import json
import os
import sys

op, size, p, direction, mode = sys.argv[1:6]
d = json.load(sys.stdin)
r = d["results"][0]
t, pt = d["transport"], d["peer_transport"]
f = d.get("faults") or {"send": {"dropped": 0}, "recv": {"dropped": 0}}


def both(k):
    return t.get(k, 0) + pt.get(k, 0)


line = {
    "op": op, "size": int(size), "p": float(p), "dir": direction, "mode": mode,
    "sr_used": d.get("selective_repeat_used", False),
    "bw": r["bw_average"], "iters": r["iterations"],
    "lost": f["send"]["dropped"] + f["recv"]["dropped"],
    "sent": d["device"]["sent_pkts"] + d["peer_device"]["sent_pkts"],
    "client_sent": d["device"]["sent_pkts"], "server_sent": d["peer_device"]["sent_pkts"],
    "server_holes": pt.get("sr_holes_reported", 0),
    "retransmits": both("retransmits"),
    "rto": both("rto_expiries"), "ib": both("ib_timeouts"), "probes": both("tail_probes"),
    "holes_reported": both("sr_holes_reported"), "hole_psns": both("sr_hole_psns"),
    "sr_resent": both("sr_packets_resent"), "rereads": both("read_holes_rereads"),
    "read_resent": both("read_responses_resent"),
    "ooo_peak": max(t.get("ooo_peak", 0), pt.get("ooo_peak", 0)),
    "ooo_dropped": both("ooo_dropped"),
    "srtt_us": max(t.get("srtt_us", 0), pt.get("srtt_us", 0)),
}
if os.environ.get("PAIR"):
    line["pair"] = int(os.environ["PAIR"])
print(json.dumps(line))
