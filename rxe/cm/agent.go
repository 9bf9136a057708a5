package cm

import (
	"errors"
	"math/bits"
	"net/netip"
	"time"

	"github.com/gorxe/gorxe/packet"
)

// Config is an Agent's fixed configuration.
type Config struct {
	// CAGUID is this node's CA GUID, sent as Local CA GUID in REQ and REP.
	CAGUID uint64
	// TIDHigh is the high 32 bits of every transaction ID this agent
	// starts (kernel ib_cm: the MAD agent's hi_tid).
	TIDHigh uint32
	// NextCommID returns a fresh local communication ID; nil draws them
	// from a counter starting at 1. IDs already in use are skipped.
	NextCommID func() uint32
	// PacketLifeTime is the 5-bit packet life time exponent of the path
	// (4.096 µs · 2^t); it is added twice to every response timeout.
	PacketLifeTime uint8
	// ServiceTimeout is the MRA service timeout exponent this agent
	// announces when its consumer has not yet answered a REQ (0 means 20,
	// about 4.3 s).
	ServiceTimeout uint8
	// MaxConns bounds the connections the agent tracks (including those in
	// time-wait) and SIDR resolutions; a REQ or SIDR_REQ beyond it is
	// dropped unanswered (its sender resends it). 0 means 4096.
	MaxConns int
	// MaxPeerTimeout is the largest timeout exponent the agent takes from
	// a peer: the CM response timeout of its REQ (how long we wait for its
	// RTU, each of up to 16 tries), the service timeout of its MRA, the
	// local ACK timeout of its REQ (our time-wait). Larger ones count as
	// it. The wire allows 31, 4.096 µs · 2^31 ≈ 2.4 h, so a peer that
	// announces that and dies holds a connection, and an Accept, for
	// some 38 h; rdma_cm announces 20 (4.3 s). 0 means 24 (about 69 s).
	MaxPeerTimeout uint8
}

// ID names one connection of an Agent: its local communication ID.
type ID uint32

// Errors returned by the Agent's methods.
var (
	// ErrUnknownID: no connection has this ID (it ended, or never was).
	ErrUnknownID = errors.New("cm: unknown connection")
	// ErrState: the connection is not in a state that allows the call.
	ErrState = errors.New("cm: connection not in a state that allows this")
	// ErrListening: a listener already holds the service ID.
	ErrListening = errors.New("cm: service ID already listened on")
	// ErrTooMany: the agent tracks Config.MaxConns connections.
	ErrTooMany = errors.New("cm: too many connections")
	// ErrInvalid: an argument does not fit its field on the wire (private
	// data longer than the message carries, a REQ field wider than its
	// bits); nothing was sent and the connection is as it was.
	ErrInvalid = errors.New("cm: argument out of range")
)

// Out is one MAD to send to QP1 of the node at To.
type Out struct {
	To  netip.Addr
	MAD [packet.MADSize]byte
}

// EventKind says what an Event reports.
type EventKind uint8

// The events.
const (
	// EventREQ (passive): a REQ for a listened service arrived; answer it
	// with Accept or Reject. Event.REQ holds it.
	EventREQ EventKind = iota + 1
	// EventREP (active): the REP arrived; move the QP to RTR and RTS with
	// its QPN and starting PSN, then call ConfirmREP (or Reject).
	EventREP
	// EventEstablished (passive): the RTU arrived (or Established was
	// called); the connection is up.
	EventEstablished
	// EventRejected: the peer rejected the connection; Event.Reason says
	// why. A REJ also ends an established connection, or one whose DREQ
	// is out (the peer never saw our RTU and gave up): the connection is
	// then in time-wait and no EventDisconnected follows.
	EventRejected
	// EventTimeout: the peer did not answer within the retries.
	EventTimeout
	// EventDisconnect: the peer sent a DREQ; the agent answered it with a
	// DREP and the connection is in time-wait.
	EventDisconnect
	// EventDisconnected: our DREQ was answered (or timed out, Reason
	// RejTimeout); the connection is in time-wait.
	EventDisconnected
	// EventSIDRREQ (passive): a SIDR_REQ for a service listened on with
	// ListenSIDR arrived; answer it with AnswerSIDR. Event.SIDRREQ holds it.
	EventSIDRREQ
	// EventSIDRREP (active): the SIDR_REP answering ResolveSIDR arrived;
	// Event.SIDRREP holds it, its Status saying whether the service gave a
	// QPN and Q_Key. The resolution is over.
	EventSIDRREP
)

var eventNames = [...]string{"", "REQ", "REP", "established", "rejected", "timeout", "disconnect", "disconnected", "SIDR_REQ", "SIDR_REP"}

// String returns the event's name.
func (k EventKind) String() string {
	if int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "event?"
}

// Event is something the consumer must know or act on.
type Event struct {
	Kind EventKind
	ID   ID
	Peer netip.Addr
	// REQ is the request (EventREQ); REP the reply (EventREP).
	REQ *packet.REQ
	REP *packet.REP
	// SIDRREQ is the request of EventSIDRREQ; SIDRREP the reply of
	// EventSIDRREP.
	SIDRREQ *packet.SIDRREQ
	SIDRREP *packet.SIDRREP
	// Reason is the REJ reason of EventRejected, RejTimeout for a timeout.
	Reason packet.REJReason
	// PrivateData is the private data of the REJ, RTU, DREQ or DREP behind
	// the event.
	PrivateData []byte
}

// Counters count what the agent dropped or answered on its own.
type Counters struct {
	Dropped      uint64 // MADs that fit no state or failed to decode (a DREQ among them is still answered with a DREP), and REQs and SIDR_REQs beyond Config.MaxConns
	Duplicates   uint64 // duplicate REQ, REP, DREQ answered again; duplicate RTU, DREP, MRA and SIDR_REQ ignored
	Retransmits  uint64 // REQ, REP, DREQ and SIDR_REQ resent on timeout
	RejectsSent  uint64 // REJs the agent sent on its own (no listener, timeout, stale, unknown), and SIDR_REPs refusing a SIDR_REQ
	TimeWaitExit uint64 // connections freed after time-wait
}

// Agent is the communication manager of one port: every connection's state
// machine, keyed by local communication ID, and the listened service IDs.
// It is not safe for concurrent use; its owner serialises calls.
type Agent struct {
	cfg       Config
	conns     map[ID]*conn
	byRemote  map[remoteKey]ID
	byQP      map[qpKey]ID
	listeners map[uint64]struct{}
	// sidrListeners are the service IDs ListenSIDR took; bySIDR finds a
	// SIDR_REQ still waiting for its consumer by its sender and request ID.
	sidrListeners map[uint64]struct{}
	bySIDR        map[sidrKey]ID
	out           []Out
	events        []Event
	nextID        uint32
	ctr           Counters
}

// remoteKey identifies a connection by the peer's side of it, to spot a
// duplicate REQ (IBA 12.9.5.2: remote comm ID and remote CA GUID).
type remoteKey struct {
	commID uint32
	guid   uint64
}

// NewAgent returns an agent with no connections and no listeners.
func NewAgent(cfg Config) *Agent {
	if cfg.ServiceTimeout == 0 {
		cfg.ServiceTimeout = 20
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = 4096
	}
	if cfg.MaxPeerTimeout == 0 {
		cfg.MaxPeerTimeout = 24
	}
	return &Agent{cfg: cfg, conns: map[ID]*conn{}, byRemote: map[remoteKey]ID{}, byQP: map[qpKey]ID{},
		listeners: map[uint64]struct{}{}, sidrListeners: map[uint64]struct{}{}, bySIDR: map[sidrKey]ID{}}
}

// Counters returns the agent's counters.
func (a *Agent) Counters() Counters { return a.ctr }

// Len returns how many connections the agent tracks (time-wait included).
func (a *Agent) Len() int { return len(a.conns) }

// Listen makes REQs for serviceID reach the consumer as EventREQ.
func (a *Agent) Listen(serviceID uint64) error {
	if _, ok := a.listeners[serviceID]; ok {
		return ErrListening
	}
	a.listeners[serviceID] = struct{}{}
	return nil
}

// Unlisten stops listening on serviceID: later REQs for it are rejected
// with reason "invalid service ID". Requests already reported stay for the
// consumer to answer.
func (a *Agent) Unlisten(serviceID uint64) { delete(a.listeners, serviceID) }

// Poll returns the next MAD to send, if any.
func (a *Agent) Poll() (Out, bool) {
	if len(a.out) == 0 {
		return Out{}, false
	}
	o := a.out[0]
	a.out = a.out[1:]
	if len(a.out) == 0 {
		a.out = a.out[:0:0]
	}
	return o, true
}

// NextEvent returns the next event for the consumer, if any.
func (a *Agent) NextEvent() (Event, bool) {
	if len(a.events) == 0 {
		return Event{}, false
	}
	e := a.events[0]
	a.events = a.events[1:]
	if len(a.events) == 0 {
		a.events = a.events[:0:0]
	}
	return e, true
}

// State returns the state of connection id, or StateIdle if it is unknown.
func (a *Agent) State(id ID) State {
	if c := a.conns[id]; c != nil {
		return c.state
	}
	return StateIdle
}

// Deadline returns the earliest time at which Tick has work, and false if
// no timer runs.
func (a *Agent) Deadline() (time.Time, bool) {
	var d time.Time
	for _, c := range a.conns {
		if !c.deadline.IsZero() && (d.IsZero() || c.deadline.Before(d)) {
			d = c.deadline
		}
	}
	return d, !d.IsZero()
}

// Tick runs every timer that has expired at now: retransmissions, their
// exhaustion, and the end of time-wait.
func (a *Agent) Tick(now time.Time) {
	for id, c := range a.conns {
		if c.deadline.IsZero() || now.Before(c.deadline) {
			continue
		}
		a.expire(now, id, c)
	}
}

// allocID returns a local communication ID not in use.
func (a *Agent) allocID() ID {
	for {
		var v uint32
		if a.cfg.NextCommID != nil {
			v = a.cfg.NextCommID()
		} else {
			a.nextID++
			v = a.nextID
		}
		if _, used := a.conns[ID(v)]; !used && v != 0 {
			return ID(v)
		}
	}
}

// tid returns the transaction ID of a message this agent starts for
// connection id (kernel ib_cm's layout: hi_tid, then the comm ID as
// little-endian).
func (a *Agent) tid(id ID) uint64 {
	return uint64(a.cfg.TIDHigh)<<32 | uint64(bits.ReverseBytes32(uint32(id)))
}

// send queues a CM MAD to peer.
func (a *Agent) send(to netip.Addr, tid uint64, m packet.CMMessage) {
	a.out = append(a.out, Out{To: to})
	packet.EncodeCM(a.out[len(a.out)-1].MAD[:], tid, m)
}

func (a *Agent) emit(e Event) { a.events = append(a.events, e) }

// duration returns 4.096 µs · 2^t.
func duration(t uint8) time.Duration { return time.Duration(packet.CMTimeout(t)) }

// Receive handles a MAD that arrived on QP1 from the node at from. MADs
// that are not CM class version 2, or fit no state, are counted and dropped.
func (a *Agent) Receive(now time.Time, from netip.Addr, mad []byte) {
	h, msg, err := packet.DecodeCMHeader(mad)
	if err != nil || h.Method != packet.MethodSend {
		a.ctr.Dropped++
		return
	}
	switch packet.CMAttr(h.AttrID) {
	case packet.AttrREQ:
		a.recvREQ(now, from, h.TID, msg)
	case packet.AttrMRA:
		a.recvMRA(now, msg)
	case packet.AttrREJ:
		a.recvREJ(now, msg)
	case packet.AttrREP:
		a.recvREP(now, from, h.TID, msg)
	case packet.AttrRTU:
		a.recvRTU(msg)
	case packet.AttrDREQ:
		a.recvDREQ(now, from, h.TID, msg)
	case packet.AttrDREP:
		a.recvDREP(now, msg)
	case packet.AttrSIDRREQ:
		a.recvSIDRREQ(from, h.TID, msg)
	case packet.AttrSIDRREP:
		a.recvSIDRREP(msg)
	default:
		a.ctr.Dropped++
	}
}

// free forgets connection id.
func (a *Agent) free(id ID) {
	c := a.conns[id]
	if c == nil {
		return
	}
	if c.isSIDR() {
		if c.passive {
			delete(a.bySIDR, sidrKey{c.peer, c.sreq.RequestID})
		}
		delete(a.conns, id)
		return
	}
	if c.passive {
		if a.byRemote[c.remoteKey()] == id {
			delete(a.byRemote, c.remoteKey())
		}
	}
	a.unindexQP(c)
	delete(a.conns, id)
}

// qpKey identifies the peer's QP of a connection by the peer's CA GUID and
// QPN (kernel ib_cm's remote QP table): one remote QP has one connection.
type qpKey struct {
	guid uint64
	qpn  uint32
}

// remoteQP returns the key of the peer's QP: the REQ's on the passive side,
// the REP's on the active side (nothing before the REP).
func (c *conn) remoteQP() qpKey {
	if c.passive {
		return qpKey{c.req.LocalCAGUID, c.req.LocalQPN}
	}
	return qpKey{c.rep.LocalCAGUID, c.rep.LocalQPN}
}

// indexQP records connection c as the one of its peer's QP: a passive one
// from its REQ, an active one from its REP, until it enters time-wait or
// ends (kernel cm_insert_remote_qpn, cm_cleanup_timewait).
func (a *Agent) indexQP(c *conn) { a.byQP[c.remoteQP()] = c.id }

func (a *Agent) unindexQP(c *conn) {
	if id, ok := a.byQP[c.remoteQP()]; ok && id == c.id {
		delete(a.byQP, c.remoteQP())
	}
}

// staleQP handles a REQ or REP that names a peer QP another connection
// already has (IBA 12.9.8.4, stale connection; kernel cm_match_req and
// cm_rep_handler): the peer has lost that connection (it restarted, or
// gave up without being heard), so an established one is disconnected
// with a DREQ, which the peer answers as one it does not know. The caller
// rejects the REQ or REP with reason "stale connection".
func (a *Agent) staleQP(now time.Time, id ID) {
	if c := a.conns[id]; c != nil && c.state == StateEstablished {
		_ = a.Disconnect(now, id, nil) // cannot fail: established, no private data
	}
}
