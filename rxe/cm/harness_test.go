package cm

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

var (
	clientAddr = netip.MustParseAddr("10.0.0.1")
	serverAddr = netip.MustParseAddr("10.0.0.2")
	service    = packet.RDMACMServiceID(packet.RDMACMProtoTCP, 7471)
	udService  = packet.RDMACMServiceID(packet.RDMACMProtoUDP, 7471)
	t0         = time.Unix(1000, 0)
)

// fate says what the wire does with one MAD.
type fate uint8

const (
	deliver fate = iota
	drop
	dup  // deliver twice
	late // deliver after the next advance of time
)

// wire connects a client and a server agent on virtual time. It records
// every MAD as "client REQ", "server REP"…, lets a test choose each MAD's
// fate by sender, attribute and occurrence, and plays a consumer that
// answers REQ and REP events when auto is set.
type wire struct {
	t        *testing.T
	now      time.Time
	client   *Agent
	server   *Agent
	fate     func(from string, attr packet.CMAttr, n int) fate
	seen     map[string]int
	log      []string
	held     []heldMAD
	events   map[string][]Event
	autoREQ  bool // the server's consumer accepts REQs at once
	autoREP  bool // the client's consumer confirms REPs at once
	rejectPD []byte
	// accepted counts the REQs the server's consumer accepted: each gets a
	// QP of its own, QPN 0x22 for the first.
	accepted uint32
}

type heldMAD struct {
	to  *Agent
	src netip.Addr
	mad [packet.MADSize]byte
}

func newWire(t *testing.T) *wire {
	w := &wire{t: t, now: t0, seen: map[string]int{}, events: map[string][]Event{}, autoREQ: true, autoREP: true}
	w.client = NewAgent(Config{CAGUID: 0xC1, TIDHigh: 1, PacketLifeTime: 10})
	w.server = NewAgent(Config{CAGUID: 0x5E, TIDHigh: 2, PacketLifeTime: 10, NextCommID: counterFrom(0x1000)})
	require.NoError(t, w.server.Listen(service))
	require.NoError(t, w.server.ListenSIDR(udService))
	return w
}

func counterFrom(n uint32) func() uint32 { return func() uint32 { n++; return n } }

func (w *wire) name(a *Agent) string {
	if a == w.client {
		return "client"
	}
	return "server"
}

// testREQ returns the REQ the client sends: RC, QPN 0x11, PSN 0x100, a
// response timeout of about 67 ms, 3 retries.
func testREQ() *packet.REQ {
	return &packet.REQ{ServiceID: service, LocalQPN: 0x11, StartingPSN: 0x100, RemoteCMResponseTimeout: 14,
		LocalCMResponseTimeout: 14, RetryCount: 7, RNRRetryCount: 7, PKey: 0xFFFF, PathMTU: 3, MaxCMRetries: 3,
		Primary: packet.CMPath{LocalGID: packet.GIDFromAddr(clientAddr), RemoteGID: packet.GIDFromAddr(serverAddr),
			HopLimit: 64, LocalACKTimeout: 14}}
}

func testREP() *packet.REP {
	return &packet.REP{LocalQPN: 0x22, StartingPSN: 0x200, TargetACKDelay: 15, RNRRetryCount: 7}
}

// testSIDRREQ returns the SIDR_REQ the client sends for udService.
func testSIDRREQ() *packet.SIDRREQ {
	r := &packet.SIDRREQ{PKey: 0xFFFF, ServiceID: udService}
	copy(r.PrivateData[:], "sidr")
	return r
}

// testSIDRREP returns the server consumer's answer: UD QPN 0x33 with
// rdma_cm's Q_Key.
func testSIDRREP() *packet.SIDRREP {
	return &packet.SIDRREP{Status: packet.SIDRValid, QPN: 0x33, QKey: 0x01234567}
}

// sidrWait and sidrRetries time the client's SIDR_REQ.
const (
	sidrWait    = 100 * time.Millisecond
	sidrRetries = 2
)

func (w *wire) resolve() ID {
	id, err := w.client.ResolveSIDR(w.now, serverAddr, testSIDRREQ(), sidrWait, sidrRetries)
	require.NoError(w.t, err)
	w.pump()
	return id
}

// pump delivers MADs until both agents are quiet, and lets the consumers
// act on events.
func (w *wire) pump() {
	for progress := true; progress; {
		progress = false
		for _, a := range []*Agent{w.client, w.server} {
			for {
				o, ok := a.Poll()
				if !ok {
					break
				}
				progress = true
				w.transmit(a, o)
			}
			for {
				e, ok := a.NextEvent()
				if !ok {
					break
				}
				progress = true
				w.consume(a, e)
			}
		}
	}
}

func (w *wire) transmit(from *Agent, o Out) {
	h, _, err := packet.DecodeCMHeader(o.MAD[:])
	require.NoError(w.t, err)
	attr := packet.CMAttr(h.AttrID)
	name := w.name(from) + " " + attr.String()
	w.seen[name]++
	f := deliver
	if w.fate != nil {
		f = w.fate(w.name(from), attr, w.seen[name])
	}
	w.log = append(w.log, fmt.Sprintf("%s%s", name, map[fate]string{drop: " (lost)", dup: " (twice)", late: " (late)"}[f]))
	to, src := w.server, clientAddr
	if from == w.server {
		to, src = w.client, serverAddr
	}
	require.Equal(w.t, map[*Agent]netip.Addr{w.client: serverAddr, w.server: clientAddr}[from], o.To)
	switch f {
	case deliver:
		to.Receive(w.now, src, o.MAD[:])
	case dup:
		to.Receive(w.now, src, o.MAD[:])
		to.Receive(w.now, src, o.MAD[:])
	case late:
		w.held = append(w.held, heldMAD{to, src, o.MAD})
	}
}

// consume plays the consumer. A REQ or REP event may come after its
// connection ended: a MAD delivered with it (advance delivers every held
// MAD before the consumers act), a REJ or a timeout, ended it first, and
// the call then finds no connection, as rxe's Accept finds a withdrawn REQ.
func (w *wire) consume(a *Agent, e Event) {
	n := w.name(a)
	w.events[n] = append(w.events[n], e)
	var err error
	switch {
	case e.Kind == EventREQ && w.autoREQ:
		rep := testREP()
		rep.LocalQPN += w.accepted
		w.accepted++
		err = a.Accept(w.now, e.ID, rep)
	case e.Kind == EventREQ && w.rejectPD != nil:
		err = a.Reject(e.ID, packet.RejConsumerReject, w.rejectPD)
	case e.Kind == EventSIDRREQ && w.autoREQ:
		err = a.AnswerSIDR(e.ID, testSIDRREP())
	case e.Kind == EventREP && w.autoREP:
		err = a.ConfirmREP(e.ID, nil)
	}
	if err != nil {
		require.ErrorIs(w.t, err, ErrUnknownID, "%v event of connection %d", e.Kind, e.ID)
		require.Equal(w.t, StateIdle, a.State(e.ID))
	}
}

// advance moves virtual time to the earlier of the agents' next deadline
// and now+max, delivers held MADs, runs the timers and pumps.
func (w *wire) advance(max time.Duration) {
	next := w.now.Add(max)
	for _, a := range []*Agent{w.client, w.server} {
		if d, ok := a.Deadline(); ok && d.Before(next) {
			next = d
		}
	}
	if next.After(w.now) {
		w.now = next
	}
	held := w.held
	w.held = nil
	for _, h := range held {
		h.to.Receive(w.now, h.src, h.mad[:])
	}
	w.client.Tick(w.now)
	w.server.Tick(w.now)
	w.pump()
}

// settle advances time step by step until no timer runs (or 200 steps).
func (w *wire) settle() {
	for i := 0; i < 200; i++ {
		_, c := w.client.Deadline()
		_, s := w.server.Deadline()
		if !c && !s && len(w.held) == 0 {
			return
		}
		w.advance(time.Hour)
	}
	w.t.Fatal("agents did not settle")
}

func (w *wire) kinds(side string) []EventKind {
	var k []EventKind
	for _, e := range w.events[side] {
		k = append(k, e.Kind)
	}
	return k
}

func (w *wire) connect() ID {
	id, err := w.client.Connect(w.now, serverAddr, testREQ())
	require.NoError(w.t, err)
	w.pump()
	return id
}

// serverID returns the server's ID for the one connection it reported.
func (w *wire) serverID() ID {
	require.NotEmpty(w.t, w.events["server"])
	return w.events["server"][0].ID
}

// pollMAD takes the next MAD a queued and returns it with its attribute and
// message area; there must be one, and its header must decode.
func pollMAD(t *testing.T, a *Agent, what string) (Out, packet.CMAttr, []byte) {
	t.Helper()
	o, ok := a.Poll()
	require.True(t, ok, what)
	h, msg, err := packet.DecodeCMHeader(o.MAD[:])
	require.NoError(t, err)
	return o, packet.CMAttr(h.AttrID), msg
}

// pollREJ is pollMAD for a MAD that must be a REJ, decoded.
func pollREJ(t *testing.T, a *Agent) (Out, packet.REJ) {
	t.Helper()
	o, attr, msg := pollMAD(t, a, "a REJ is queued")
	require.Equal(t, packet.AttrREJ, attr)
	var rej packet.REJ
	require.NoError(t, rej.Decode(msg))
	return o, rej
}

// repReceived connects a wire's client to its server, the client's
// consumer not confirming the REP: the client is left in REP received,
// the server in REP sent. It returns the wire and both connections' IDs.
func repReceived(t *testing.T) (w *wire, cid, sid ID) {
	t.Helper()
	w = newWire(t)
	w.autoREP = false
	cid = w.connect()
	sid = w.serverID()
	require.Equal(t, StateREPRcvd, w.client.State(cid))
	return w, cid, sid
}
