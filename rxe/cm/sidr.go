package cm

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/gorxe/gorxe/packet"
)

// Service ID resolution (IBA 12.11): a UD consumer asks the node at an
// address for the QPN and Q_Key behind a service ID with a SIDR_REQ, and
// the service answers with a SIDR_REP. Neither side keeps anything once
// the SIDR_REP is out or in: there is no connection, no remote ID, no
// time-wait.
//
//	active                          passive
//	ResolveSIDR ── SIDR_REQ ───────▶ EventSIDRREQ  (AnswerSIDR)
//	EventSIDRREP ◀─────── SIDR_REP ─ AnswerSIDR
//
// The active side resends its SIDR_REQ every wait until a SIDR_REP comes or
// its retries run out (EventTimeout); the IBA gives the SIDR_REQ no timeout
// field, so the caller chooses both (kernel ib_send_cm_sidr_req takes them
// as timeout_ms and max_cm_retries). On the passive side a SIDR_REQ that
// repeats one still waiting for its consumer (same sender, same request ID)
// is dropped; one that comes after the answer is a new request, reported
// again (kernel cm_sidr_req_handler keeps a request in its remote SIDR
// table only until ib_send_cm_sidr_rep).

// sidrKey names a SIDR_REQ on the passive side: its sender's IP address
// and request ID. Kernel cm_insert_remote_sidr keys its remote SIDR table
// by the request ID and the sender's source LID, which on RoCE is the
// same for every sender; the address keeps apart two clients whose
// request IDs happen to be equal.
type sidrKey struct {
	peer netip.Addr
	id   uint32
}

// ListenSIDR makes SIDR_REQs for serviceID reach the consumer as
// EventSIDRREQ. The service IDs of ListenSIDR and Listen are apart: a
// SIDR_REQ for one only Listen took is refused as for no listener, and a
// REQ for one only ListenSIDR took is rejected as such.
func (a *Agent) ListenSIDR(serviceID uint64) error {
	if _, ok := a.sidrListeners[serviceID]; ok {
		return ErrListening
	}
	a.sidrListeners[serviceID] = struct{}{}
	return nil
}

// UnlistenSIDR stops listening for SIDR_REQs on serviceID: later ones are
// answered with status "service ID not supported". Requests already
// reported stay for the consumer to answer.
func (a *Agent) UnlistenSIDR(serviceID uint64) { delete(a.sidrListeners, serviceID) }

// ResolveSIDR asks the node at peer for the UD QP behind req.ServiceID
// (IBA 12.11.1, active side): it sends req, with RequestID filled in by the
// agent (the ID it returns), and waits wait for the SIDR_REP, resending the
// SIDR_REQ up to retries times. EventSIDRREP reports the answer,
// EventTimeout the end of the retries. The caller fills the service ID, the
// P_Key and the private data. A wait that is not positive is ErrInvalid.
func (a *Agent) ResolveSIDR(now time.Time, peer netip.Addr, req *packet.SIDRREQ, wait time.Duration, retries uint8) (ID, error) {
	if wait <= 0 {
		return 0, fmt.Errorf("%w: SIDR_REQ wait %v", ErrInvalid, wait)
	}
	if len(a.conns) >= a.cfg.MaxConns {
		return 0, ErrTooMany
	}
	id := a.allocID()
	c := &conn{id: id, state: StateSIDRREQSent, peer: peer, tid: a.tid(id), sreq: *req, wait: wait, retries: retries}
	c.sreq.RequestID = uint32(id)
	a.conns[id] = c
	a.send(peer, c.tid, &c.sreq)
	c.deadline = now.Add(wait)
	return id, nil
}

// recvSIDRREQ handles a SIDR_REQ (IBA 12.11.1, passive side). One for a
// service ListenSIDR took becomes EventSIDRREQ. One for any other service
// is answered at once with a SIDR_REP of status "service ID not
// supported", in its transaction, as kernel cm_sidr_req_handler answers
// one that no listener takes, so that the peer's wait ends at once rather
// than after all its retries. A duplicate of one still waiting for the
// consumer is dropped. So is a request that comes while the agent tracks
// Config.MaxConns connections and resolutions: kernel cm_sidr_req_handler
// answers nothing when it cannot allocate the request's cm_id
// (cm_alloc_id_priv fails), and the IBA has no SIDR_REP status for a
// passing lack of resources ("rejected" would end the peer's resolution
// for good), so the peer resends it on its timer and is served once there
// is room.
func (a *Agent) recvSIDRREQ(from netip.Addr, tid uint64, msg []byte) {
	var req packet.SIDRREQ
	_ = req.Decode(msg) // cannot fail: Receive passes a whole CMDataSize message area
	key := sidrKey{from, req.RequestID}
	if _, ok := a.bySIDR[key]; ok {
		a.ctr.Duplicates++
		return
	}
	if _, ok := a.sidrListeners[req.ServiceID]; !ok {
		a.send(from, tid, &packet.SIDRREP{RequestID: req.RequestID, Status: packet.SIDRServiceIDNotSup, ServiceID: req.ServiceID})
		a.ctr.RejectsSent++
		return
	}
	if len(a.conns) >= a.cfg.MaxConns {
		a.ctr.Dropped++
		return
	}
	id := a.allocID()
	c := &conn{id: id, state: StateSIDRREQRcvd, passive: true, peer: from, tid: tid, sreq: req}
	a.conns[id] = c
	a.bySIDR[key] = id
	r := req
	a.emit(Event{Kind: EventSIDRREQ, ID: id, Peer: from, SIDRREQ: &r})
}

// AnswerSIDR answers the SIDR_REQ of id with rep (IBA 12.11.2): the agent
// fills RequestID and ServiceID from the request; the caller fills the
// status and, for status SIDRValid, its UD QPN and Q_Key, and any
// additional information and private data. The SIDR_REP goes out in the
// request's transaction and the request is forgotten. A QPN or vendor ID
// wider than 24 bits, additional information longer than its 72 bytes or
// a status the IBA does not define (above SIDRUnsupportedVer) is
// ErrInvalid. The SIDR_REP carries the additional information length and
// all 24 bits of the vendor ID, as IBA table 120 lays them out; kernel
// cm_format_sidr_rep writes no length (the consumer's additional
// information goes without it) and the vendor ID's bits 15–0 only, which
// differs from gorxe's bytes only for a consumer that gives either
// (rxe.UDRequest gives neither).
func (a *Agent) AnswerSIDR(id ID, rep *packet.SIDRREP) error {
	c := a.conns[id]
	if c == nil {
		return ErrUnknownID
	}
	if c.state != StateSIDRREQRcvd {
		return ErrState
	}
	if rep.QPN > 0xFFFFFF || rep.VendorID > 0xFFFFFF || rep.AddInfoLen > packet.SIDRREPAddInfoSize ||
		rep.Status > packet.SIDRUnsupportedVer {
		return fmt.Errorf("%w: SIDR_REP QPN %#x, vendor ID %#x (24 bits), additional information length %d (at most %d), status %d",
			ErrInvalid, rep.QPN, rep.VendorID, rep.AddInfoLen, packet.SIDRREPAddInfoSize, rep.Status)
	}
	r := *rep
	r.RequestID = c.sreq.RequestID
	r.ServiceID = c.sreq.ServiceID
	a.send(c.peer, c.tid, &r)
	a.free(id)
	return nil
}

// recvSIDRREP handles a SIDR_REP (IBA 12.11.2, active side): it ends the
// resolution its request ID names, whatever its status, with EventSIDRREP.
// The event carries every field as the peer sent it, an additional
// information length above 72 included, as kernel cm_format_sidr_rep_event
// hands info_len on unchecked. One that names no resolution waiting for
// its answer (a duplicate, a late one after the retries ran out) is
// dropped, as kernel cm_sidr_rep_handler drops an unmatched reply.
func (a *Agent) recvSIDRREP(msg []byte) {
	var rep packet.SIDRREP
	_ = rep.Decode(msg) // cannot fail: Receive passes a whole CMDataSize message area
	c := a.conns[ID(rep.RequestID)]
	if c == nil || c.state != StateSIDRREQSent {
		a.ctr.Dropped++
		return
	}
	a.emit(Event{Kind: EventSIDRREP, ID: c.id, Peer: c.peer, SIDRREP: &rep})
	a.free(c.id)
}

// abortSIDR ends a resolution the consumer gives up, as kernel
// cm_destroy_id does: a SIDR_REQ waiting for its answer is forgotten
// (nothing goes out, a late SIDR_REP is dropped), one waiting for the
// consumer is answered with status "rejected".
func (a *Agent) abortSIDR(c *conn) {
	if c.state == StateSIDRREQRcvd {
		_ = a.AnswerSIDR(c.id, &packet.SIDRREP{Status: packet.SIDRRejected}) // cannot fail: the state fits, the fields are in range
		return
	}
	a.free(c.id)
}
