package responder

import (
	"github.com/gorxe/gorxe/packet"
)

// resource is a responder resource (rxe struct resp_res; IBA 9.7.5.1.3):
// what is needed to answer a duplicate READ, atomic, FLUSH or ATOMIC_WRITE
// without executing it again.
type resource struct {
	kind  reqKind // kindNone: free
	first packet.PSN
	npsn  int // PSNs used: first .. first+npsn-1
	// READ: the original request.
	va     uint64
	rkey   uint32
	length uint32
	// COMPARE_SWAP / FETCH_ADD: the value before the operation.
	orig uint64
	// wholeDup: a duplicate of the whole READ came after its train had
	// left and was dropped (selective repeat, firstWholeDuplicate).
	wholeDup bool
}

// readReq is a READ to answer: a new one, a replayed part of one, or the
// empty response of FLUSH/ATOMIC_WRITE (length 0).
type readReq struct {
	psn    packet.PSN
	va     uint64
	rkey   uint32
	length uint32
}

// readPSNs returns the number of PSNs a READ of length bytes uses
// (IBA 9.7.1: max(1, ceil(length/PMTU))).
func (r *Responder) readPSNs(length uint32) int {
	return max(1, int((uint64(length)+uint64(r.mtu)-1)/uint64(r.mtu)))
}

// newResource takes the next resource, recycling the oldest (rxe
// rxe_prepare_res).
func (r *Responder) newResource(kind reqKind, npsn int) *resource {
	res := &r.res[r.resHead]
	r.resHead++
	if r.resHead == len(r.res) {
		r.resHead = 0
	}
	*res = resource{kind: kind, first: r.psn, npsn: npsn}
	return res
}

// findResource returns the resource of the given kind whose PSNs include
// psn (rxe find_resource), or nil.
func (r *Responder) findResource(kind reqKind, psn packet.PSN) *resource {
	for i := range r.res {
		res := &r.res[i]
		if res.kind == kind && psn.InRange(res.first, res.npsn) {
			return res
		}
	}
	return nil
}

// replayRead checks a duplicate READ against its resource (rxe
// duplicate_request): same R_Key, a sub-range of the original, and a PSN
// span inside the original's. It sets r.rd on success.
func (r *Responder) replayRead(res *resource) bool {
	reth := r.pkt.RETH()
	va, length := reth.VA(), reth.DMALen()
	if va < res.va || length > res.length || va-res.va > uint64(res.length-length) {
		return false
	}
	if res.length != 0 && reth.RKey() != res.rkey {
		return false
	}
	if int(r.psn.Diff(res.first))+r.readPSNs(length) > res.npsn {
		return false
	}
	r.rd = readReq{psn: r.psn, va: va, rkey: res.rkey, length: length}
	return true
}

// streamOf reports whether the queued item it is a response stream of the
// READ held by res (its train, or an extra stream of a duplicate): a READ
// response stream with res's R_Key whose next PSN lies in res's span.
func streamOf(it *outItem, res *resource) bool {
	return it.kind == outRead && it.rkey == res.rkey && !it.psn.Before(res.first) && it.psn.Before(res.first.Add(res.npsn))
}

// restartTrain handles a duplicate READ (r.rd, checked by replayRead)
// whose original train res, or the replay of an earlier duplicate of it,
// is still in the output queue. If the duplicate asks only for PSNs that
// stream has still to send, the stream answers it and the duplicate is
// dropped; otherwise — it asks for PSNs already sent (responses lost, or
// overtaken so that the requester dropped the rest), or for PSNs past the
// stream's end (a replay ends where its duplicate's range ends) — the
// stream is repositioned to the duplicate's range and continues from
// there with FIRST, so the requester does not wait behind the rest of a
// stream it will discard, and the READ keeps one stream. rxe does the
// same: its duplicate_request resets the READ's responder resource to
// the duplicate's PSN, VA and length; the repositioned stream then
// answers the duplicate, also when it faults (readFault). It reports
// whether it handled the duplicate.
func (r *Responder) restartTrain(res *resource) bool {
	rdEnd := r.rd.psn.Add(r.readPSNs(r.rd.length))
	for i := range r.q.Len() {
		it := r.q.At(i)
		if !streamOf(it, res) {
			continue
		}
		end := it.psn.Add(r.readPSNs(it.resid))
		if !r.rd.psn.Before(it.psn) && !end.Before(rdEnd) {
			r.ctrs.ReadsCovered++
			return true
		}
		if r.rd.psn.Before(it.psn) {
			r.ctrs.ReadResponsesResent += uint64(it.psn.Diff(r.rd.psn))
		}
		if rdEnd.After(end) {
			// PSNs past the stream's end, which the READ's train sent.
			from := end
			if r.rd.psn.After(end) {
				from = r.rd.psn
			}
			r.ctrs.ReadResponsesResent += uint64(rdEnd.Diff(from))
		}
		it.psn, it.req, it.va, it.resid, it.first = r.rd.psn, r.rd.psn, r.rd.va, r.rd.length, true
		// The stream now answers the duplicate: a fault of it is the
		// duplicate's, after the requests received before it
		// (readFault).
		it.heldMark, it.midMsg = r.heldIn, r.wqe.valid
		r.ctrs.ReadRestarts++
		return true
	}
	return false
}

// readReply mirrors rxe read_reply, except that it only queues the response
// train; NextPacket builds the packets. A new READ takes a resource and
// moves ePSN past all its PSNs now, so that later requests are processed
// while the train is still being sent. A replay restarts at the duplicate's
// PSN with FIRST/ONLY, as rdmavt does (rxe sends MIDDLE/LAST there); both
// rxe's and rdmavt's requesters accept it. Under selective repeat a replay
// goes to the head of the output queue (queueReadFront).
func (r *Responder) readReply() State {
	if r.replay {
		r.ctrs.ReadResponsesResent += uint64(r.readPSNs(r.rd.length))
		if r.cfg.SelectiveRepeat {
			r.queueReadFront(r.rd, r.msn)
			return StateCleanup
		}
	} else {
		n := r.readPSNs(r.rd.length)
		res := r.newResource(kindRead, n)
		res.va, res.rkey, res.length = r.rd.va, r.rd.rkey, r.rd.length
		r.epsn = r.psn.Add(n)
		r.inMsg = msgNone
	}
	r.queueRead(r.rd, r.msn)
	return StateCleanup
}
