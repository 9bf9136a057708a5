package cm

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"math/bits"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// The CA GUIDs of the capture's server and client (captureMADs).
const (
	capServerGUID = 0x505400fffe770002
	capClientGUID = 0x505400fffe770003
)

// capService and capUDService are the capture's port 18515 as rdma_cm's
// TCP and UDP service IDs.
var (
	capService   = packet.RDMACMServiceID(packet.RDMACMProtoTCP, 18515)
	capUDService = packet.RDMACMServiceID(packet.RDMACMProtoUDP, 18515)
)

// capFixture is FuzzReceive's agent: the capture's server (its CA GUID,
// its transaction IDs, its communication IDs) holding a connection in
// every state of IBA 12.9.2 and a service ID resolution in each of its
// two, so that the capture's MADs, fed to it as they are, reach a live
// state machine:
//
//	P1 0xccfadc13  passive, REP sent        (capture REQ 1 accepted; its RTU establishes it)
//	P2 0xc8fadc13  passive, established     (REQ 2 and RTU 2; the client's DREQ ends it)
//	A1 0x54088e95  active, REQ sent         (the capture client's REQ 1; REP 1 answers it)
//	A2 0x55088e95  active, DREQ sent        (REQ 2, REP 2, RTU, DREQ; the server's DREP ends it)
//	P3             passive, REQ received    (REQ 1 with comm ID 0x56088e95, QPN 0x40)
//	P4             passive, MRA sent        (same, 0x57088e95, QPN 0x41, received twice)
//	P5             passive, time-wait       (same, 0x58088e95, QPN 0x42, accepted, RTU, DREQ)
//	A3             active, REP received     (REP from comm ID 0xcdfadc13, QPN 0x51)
//	A4             active, established      (REP from comm ID 0xcefadc13, QPN 0x53)
//	S1             passive SIDR_REQ received (request 0x6a5ec0de for UDP port 18515)
//	S2             active SIDR_REQ sent
//
// The fuzzer's MADs reach the agent from the capture's client address.
type capFixture struct {
	a                                  *Agent
	p3, p4, p5, a3, a4, s1, s2         ID
	p5QPN, a3REPComm, a4REPComm, s1Req uint32
}

// capFixtureMaxConns is the fixture agent's Config.MaxConns: room for a
// few more REQs and SIDR_REQs than it holds, then MaxConns' drops.
const capFixtureMaxConns = 16

// capREQ returns the capture's REQ i (0 or 3) as the agent decodes it,
// with another communication ID and QPN when id is not 0.
func capREQ(t testing.TB, m []capMAD, i int, id, qpn uint32) *packet.REQ {
	_, msg, err := packet.DecodeCMHeader(m[i].mad)
	require.NoError(t, err)
	var req packet.REQ
	require.NoError(t, req.Decode(msg))
	if id != 0 {
		req.LocalCommID, req.LocalQPN = id, qpn
	}
	return &req
}

// capTID is the transaction ID the capture's client uses for a message of
// its communication ID id (kernel ib_cm: hi_tid 2, the ID little-endian).
func capTID(id uint32) uint64 { return 2<<32 | uint64(bits.ReverseBytes32(id)) }

// newCapFixture builds the fixture from m, the capture's MADs
// (captureMADs).
func newCapFixture(t testing.TB, m []capMAD) *capFixture {
	next := ids(0xccfadc13, 0xc8fadc13, 0x54088e95, 0x55088e95)
	n, counter := 0, uint32(0x2000)
	a := NewAgent(Config{CAGUID: capServerGUID, TIDHigh: 2, PacketLifeTime: 18, MaxConns: capFixtureMaxConns,
		NextCommID: func() uint32 {
			if n++; n <= 4 {
				return next()
			}
			counter++
			return counter
		}})
	require.NoError(t, a.Listen(capService))
	require.NoError(t, a.ListenSIDR(capUDService))
	x := &capFixture{a: a}
	must := func(err error) { require.NoError(t, err) }
	one := func(k EventKind) ID {
		e, ok := a.NextEvent()
		require.True(t, ok, "event %v", k)
		require.Equal(t, k, e.Kind)
		return e.ID
	}
	recv := func(b []byte) { a.Receive(t0, capClient, b) }
	accept := func(qpn, psn uint32) ID {
		id := one(EventREQ)
		must(a.Accept(t0, id, &packet.REP{LocalQPN: qpn, StartingPSN: psn, TargetACKDelay: 15, RNRRetryCount: 7}))
		return id
	}
	connect := func(i int, qpn uint32) ID {
		p := capREQ(t, m, i, 0, 0)
		p.LocalCommID, p.LocalCAGUID = 0, 0
		if qpn != 0 {
			p.LocalQPN = qpn
		}
		id, err := a.Connect(t0, capServer, p)
		must(err)
		return id
	}
	rep := func(to ID, comm, qpn uint32) {
		a.Receive(t0, capServer, cmMAD(capTID(uint32(to)), &packet.REP{LocalCommID: comm, RemoteCommID: uint32(to),
			LocalQPN: qpn, StartingPSN: 0x1234, TargetACKDelay: 15, RNRRetryCount: 7, LocalCAGUID: capServerGUID}))
		require.Equal(t, to, one(EventREP))
	}

	recv(m[0].mad)
	p1 := accept(0x3d, 0x37140f)
	recv(m[3].mad)
	p2 := accept(0x3e, 0x2a0db3)
	recv(m[5].mad)
	one(EventEstablished)
	a1 := connect(0, 0)
	a2 := connect(3, 0)
	a.Receive(t0, capServer, m[4].mad)
	one(EventREP)
	must(a.ConfirmREP(a2, nil))
	must(a.Disconnect(t0, a2, nil))

	req := func(id, qpn uint32) []byte { return cmMAD(capTID(id), capREQ(t, m, 0, id, qpn)) }
	recv(req(0x56088e95, 0x40))
	x.p3 = one(EventREQ)
	recv(req(0x57088e95, 0x41))
	x.p4 = one(EventREQ)
	recv(req(0x57088e95, 0x41))
	recv(req(0x58088e95, 0x42))
	x.p5QPN = 0x3f
	x.p5 = accept(x.p5QPN, 0x99)
	recv(cmMAD(capTID(0x58088e95), &packet.RTU{LocalCommID: 0x58088e95, RemoteCommID: uint32(x.p5)}))
	one(EventEstablished)
	recv(cmMAD(capTID(0x58088e95), &packet.DREQ{LocalCommID: 0x58088e95, RemoteCommID: uint32(x.p5), RemoteQPN: x.p5QPN}))
	one(EventDisconnect)

	x.a3, x.a3REPComm = connect(0, 0x50), 0xcdfadc13
	rep(x.a3, x.a3REPComm, 0x51)
	x.a4, x.a4REPComm = connect(0, 0x52), 0xcefadc13
	rep(x.a4, x.a4REPComm, 0x53)
	must(a.ConfirmREP(x.a4, nil))

	x.s1Req = 0x6a5ec0de
	recv(cmMAD(2<<32|uint64(bits.ReverseBytes32(x.s1Req)), capSIDRREQ(t, m, x.s1Req, capUDService)))
	x.s1 = one(EventSIDRREQ)
	s2, err := a.ResolveSIDR(t0, capServer, capSIDRREQ(t, m, 0, capUDService), 4096*time.Millisecond, 15)
	must(err)
	x.s2 = s2
	for {
		if _, ok := a.Poll(); !ok {
			break
		}
	}
	_, ev := a.NextEvent()
	require.False(t, ev)

	for id, s := range map[ID]State{p1: StateREPSent, p2: StateEstablished, a1: StateREQSent, a2: StateDREQSent,
		x.p3: StateREQRcvd, x.p4: StateMRASent, x.p5: StateTimeWait, x.a3: StateREPRcvd, x.a4: StateEstablished,
		x.s1: StateSIDRREQRcvd, x.s2: StateSIDRREQSent} {
		require.Equal(t, s, a.State(id), "connection %#x", id)
	}
	require.Equal(t, 11, a.Len())
	require.Equal(t, []ID{0xccfadc13, 0xc8fadc13, 0x54088e95, 0x55088e95}, []ID{p1, p2, a1, a2})
	return x
}

// capSIDRREQ returns a SIDR_REQ for service whose private data is the
// RDMA CM IP header of the capture's REQ 1 (the client's address and port
// to the server's), as rdma_cm's cma_resolve_ib_udp sends it.
func capSIDRREQ(t testing.TB, m []capMAD, reqID uint32, service uint64) *packet.SIDRREQ {
	r := &packet.SIDRREQ{RequestID: reqID, PKey: 0xFFFF, ServiceID: service}
	copy(r.PrivateData[:], capREQ(t, m, 0, 0, 0).PrivateData[:packet.CMIPHeaderSize])
	return r
}

// FuzzReceive feeds the fixture agent (capFixture) up to fuzzMADs MADs
// made of the input, cut into MADSize pieces (a shorter last piece is a
// truncated MAD), then runs its timers until none is left. Whatever the
// bytes:
//   - it never panics, and its invariants (checkInvariants) hold after
//     every MAD and every timer;
//   - a MAD that is truncated, not a CM Send MAD or of an attribute the CM
//     does not know is dropped and counted, answered with nothing, and
//     changes no state;
//   - a MAD changes at most one connection, only by a transition IBA 12.9
//     gives its message (recvTransitions), reports exactly the event of
//     that transition, and makes at most one new connection: a REQ (REQ
//     received) or a SIDR_REQ (SIDR_REQ received);
//   - it answers with at most two MADs, each of a kind the IBA allows in
//     reply to that message (replyKinds) and consistent with the state of
//     the connection it names (checkReply): a whole CM Send MAD with the
//     header of its attribute, fields that survive decode and encode,
//     the IDs and transaction ID of the message it answers;
//   - every timer is set after now and at most the longest wait the agent
//     allows (a peer's timeouts count up to Config.MaxPeerTimeout), with
//     at most 15 retries; the agent never tracks more than MaxConns
//     connections;
//   - time alone then ends every connection that waits for the peer
//     (resending its message, rejecting with reason Timeout, leaving
//     time-wait: tickTransitions) within 17 timer runs per connection,
//     leaving only those that wait for a consumer or are established.
func FuzzReceive(f *testing.F) {
	m := captureMADs(f)
	x := newCapFixture(f, m)
	for _, c := range m {
		f.Add(c.mad) // the capture's REQ, REP, RTU, DREQ, DREP
	}
	f.Add(append(bytes.Clone(m[2].mad), m[6].mad...)) // RTU 1 establishes P1, then DREQ 2
	f.Add(append(bytes.Clone(m[1].mad), m[8].mad...)) // REP 1 for A1, then the server's DREQ 1
	f.Add(append(bytes.Clone(m[7].mad), m[7].mad...)) // DREP 2 for A2, twice
	// What the capture does not hold, made with its IDs and private data.
	tidA1 := capTID(0x54088e95)
	v6 := capREQ(f, m, 0, 0x59088e95, 0x44)
	v6.Primary.LocalGID = packet.GIDFromAddr(netip.MustParseAddr("fd00::3"))
	v6.Primary.RemoteGID = packet.GIDFromAddr(netip.MustParseAddr("fd00::2"))
	(&packet.CMIPHeader{IPVersion: 6, SrcPort: 57410, Src: netip.MustParseAddr("fd00::3"), Dst: netip.MustParseAddr("fd00::2")}).Encode(v6.PrivateData[:])
	ud := capREQ(f, m, 0, 0x5a088e95, 0x45)
	ud.TransportServiceType = packet.CMTransportRD
	timeoutREJ := &packet.REJ{LocalCommID: 0x56088e95, MessageRejected: packet.MsgOther, RejectedInfoLen: 8, Reason: packet.RejTimeout}
	binary.BigEndian.PutUint64(timeoutREJ.ARI[:], capClientGUID)
	for _, s := range []struct {
		tid uint64
		m   packet.CMMessage
	}{
		{capTID(0x59088e95), v6},                                // an IPv6 REQ
		{capTID(0x5a088e95), ud},                                // a REQ for RD
		{capTID(0x56088e95), capREQ(f, m, 0, 0x56088e95, 0x40)}, // P3's REQ again: an MRA
		{capTID(0x58088e95), capREQ(f, m, 0, 0x58088e95, 0x42)}, // P5's REQ in time-wait: stale
		{capTID(0x5b088e95), capREQ(f, m, 0, 0x5b088e95, 0x39)}, // P1's peer QP: stale
		{tidA1, &packet.MRA{LocalCommID: 0xccfadc13, RemoteCommID: 0x54088e95, MessageMRAed: packet.MsgREQ, ServiceTimeout: 31}},              // for A1's REQ
		{capTID(0x54088e95), &packet.MRA{LocalCommID: 0x54088e95, RemoteCommID: 0xccfadc13, MessageMRAed: packet.MsgREP, ServiceTimeout: 23}}, // for P1's REP
		{tidA1, &packet.REJ{LocalCommID: 0xccfadc13, RemoteCommID: 0x54088e95, MessageRejected: packet.MsgREQ, Reason: packet.RejConsumerReject}},
		{capTID(0x56088e95), timeoutREJ}, // P3's peer gives up its REQ
		{capTID(0x55088e95), &packet.REJ{LocalCommID: 0x55088e95, RemoteCommID: 0xc8fadc13, MessageRejected: packet.MsgOther, Reason: packet.RejConsumerReject}},
		{capTID(x.a3REPComm), &packet.REP{LocalCommID: x.a3REPComm, RemoteCommID: uint32(x.a3), LocalQPN: 0x51}},                // A3's REP again: an MRA
		{capTID(x.a4REPComm), &packet.REP{LocalCommID: x.a4REPComm, RemoteCommID: uint32(x.a4), LocalQPN: 0x53}},                // A4's REP again: the RTU
		{capTID(0x99), &packet.REP{LocalCommID: 0x99, RemoteCommID: 0x77, LocalQPN: 0x60}},                                      // a REP of no connection
		{capTID(0x58088e95), &packet.DREQ{LocalCommID: 0x58088e95, RemoteCommID: uint32(x.p5), RemoteQPN: x.p5QPN}},             // P5's DREQ again
		{capTID(0x58088e95), &packet.RTU{LocalCommID: 0x58088e95, RemoteCommID: uint32(x.p5)}},                                  // a late RTU
		{2<<32 | uint64(bits.ReverseBytes32(x.s1Req)), capSIDRREQ(f, m, x.s1Req, capUDService)},                                 // S1 again
		{2<<32 | 0x0102, capSIDRREQ(f, m, 0x0201, packet.RDMACMServiceID(packet.RDMACMProtoUDP, 9))},                            // no listener
		{capTID(uint32(x.s2)), &packet.SIDRREP{RequestID: uint32(x.s2), Status: packet.SIDRValid, QPN: 0x13, QKey: 0x01234567}}, // S2's answer
	} {
		f.Add(cmMAD(s.tid, s.m))
	}
	for _, c := range cmMessages() {
		f.Add(cmMAD(3, c)) // every kind, all zero
	}
	f.Add(m[0].mad[:packet.MADSize-1])
	f.Fuzz(func(t *testing.T, in []byte) {
		a := newCapFixture(t, m).a
		for i := 0; i < fuzzMADs && len(in) > 0; i++ {
			n := min(len(in), packet.MADSize)
			receiveChecked(t, a, in[:n])
			in = in[n:]
		}
		drainTimers(t, a)
	})
}

// fuzzMADs bounds the MADs of one FuzzReceive input.
const fuzzMADs = 8

// replyKinds are the messages the agent may send in reply to each
// message it receives (IBA 12.9.5, 12.9.6, 12.11): REJ and MRA for a REQ,
// and a DREQ for the connection a stale REQ's peer QP had (12.9.8.4);
// REJ, RTU and MRA for a REP, and the same DREQ; a DREP for a DREQ; a
// SIDR_REP for a SIDR_REQ. Nothing answers an MRA, REJ, RTU, DREP or
// SIDR_REP.
var replyKinds = map[packet.CMAttr][]packet.CMAttr{
	packet.AttrREQ:     {packet.AttrREJ, packet.AttrMRA, packet.AttrDREQ},
	packet.AttrREP:     {packet.AttrREJ, packet.AttrRTU, packet.AttrMRA, packet.AttrDREQ},
	packet.AttrDREQ:    {packet.AttrDREP},
	packet.AttrSIDRREQ: {packet.AttrSIDRREP},
}

// transition is a connection's state before and after (StateIdle: it is
// not tracked).
type transition struct{ from, to State }

// recvTransitions are, for each message, the changes of state it may make
// to the connection it names and the event each reports (0: none): IBA
// 12.9.5 (connection establishment), 12.9.6 (disconnection), 12.9.8.4
// (stale connections: a REQ or REP from a peer QP that an established
// connection has sends that one's DREQ), 12.11 (SIDR). A new connection
// is a transition from StateIdle.
var recvTransitions = map[packet.CMAttr]map[transition]EventKind{
	packet.AttrREQ: {
		{StateIdle, StateREQRcvd}:         EventREQ,
		{StateREQRcvd, StateMRASent}:      0,
		{StateEstablished, StateDREQSent}: 0,
	},
	packet.AttrREJ: {
		{StateREQSent, StateIdle}:         EventRejected,
		{StateREPRcvd, StateIdle}:         EventRejected,
		{StateREQRcvd, StateIdle}:         EventRejected,
		{StateMRASent, StateIdle}:         EventRejected,
		{StateREPSent, StateIdle}:         EventRejected,
		{StateEstablished, StateTimeWait}: EventRejected,
		{StateDREQSent, StateTimeWait}:    EventRejected,
	},
	packet.AttrREP: {
		{StateREQSent, StateREPRcvd}:      EventREP,
		{StateEstablished, StateDREQSent}: 0,
	},
	packet.AttrRTU: {{StateREPSent, StateEstablished}: EventEstablished},
	packet.AttrDREQ: {
		{StateEstablished, StateTimeWait}: EventDisconnect,
		{StateREPSent, StateTimeWait}:     EventDisconnect,
		{StateDREQSent, StateTimeWait}:    EventDisconnected,
	},
	packet.AttrDREP:    {{StateDREQSent, StateTimeWait}: EventDisconnected},
	packet.AttrSIDRREQ: {{StateIdle, StateSIDRREQRcvd}: EventSIDRREQ},
	packet.AttrSIDRREP: {{StateSIDRREQSent, StateIdle}: EventSIDRREP},
}

// tickTransitions are the changes of state a timer makes and the event
// each reports: retries run out (REJ Timeout and EventTimeout; for a DREQ
// time-wait and EventDisconnected; IBA 12.9.5.1, 12.9.6), time-wait ends
// (12.9.8.4), a SIDR_REQ's retries run out (12.11).
var tickTransitions = map[transition]EventKind{
	{StateREQSent, StateIdle}:      EventTimeout,
	{StateREPSent, StateIdle}:      EventTimeout,
	{StateSIDRREQSent, StateIdle}:  EventTimeout,
	{StateDREQSent, StateTimeWait}: EventDisconnected,
	{StateTimeWait, StateIdle}:     0,
}

// snapshot copies every connection of a.
func snapshot(a *Agent) map[ID]conn {
	s := make(map[ID]conn, len(a.conns))
	for id, c := range a.conns {
		s[id] = *c
	}
	return s
}

// takeAll returns what a has queued to send and to report.
func takeAll(a *Agent) ([]Out, []Event) {
	var outs []Out
	var evs []Event
	for o, ok := a.Poll(); ok; o, ok = a.Poll() {
		outs = append(outs, o)
	}
	for e, ok := a.NextEvent(); ok; e, ok = a.NextEvent() {
		evs = append(evs, e)
	}
	return outs, evs
}

// states returns the state of every connection of a.
func states(a *Agent) map[ID]State {
	s := make(map[ID]State, len(a.conns))
	for id, c := range a.conns {
		s[id] = c.state
	}
	return s
}

// changes returns the transitions of every connection whose state
// differs between before and a now.
func changes(before map[ID]State, a *Agent) map[ID]transition {
	ch := map[ID]transition{}
	for id, s := range before {
		if now := a.State(id); now != s {
			ch[id] = transition{s, now}
		}
	}
	for id, c := range a.conns {
		if _, ok := before[id]; !ok {
			ch[id] = transition{StateIdle, c.state}
		}
	}
	return ch
}

// checkEvents requires evs to be exactly the events that the transitions
// ch report by table. Both lists are sorted before they are compared, so
// that the comparison does the same work whatever order the maps gave:
// the fuzzer counts the test's own code as coverage.
func checkEvents(t *testing.T, table map[transition]EventKind, ch map[ID]transition, evs []Event, what string) {
	var want, got []Event
	for id, tr := range ch {
		k, ok := table[tr]
		if !ok {
			t.Fatalf("%s: connection %#x went from %v to %v", what, id, tr.from, tr.to)
		}
		if k != 0 {
			want = append(want, Event{Kind: k, ID: id})
		}
	}
	for _, e := range evs {
		got = append(got, Event{Kind: e.Kind, ID: e.ID})
	}
	byID := func(x, y Event) int { return cmp.Or(cmp.Compare(x.ID, y.ID), cmp.Compare(x.Kind, y.Kind)) }
	slices.SortFunc(want, byID)
	slices.SortFunc(got, byID)
	require.Equal(t, want, got, "%s: events", what)
}

// checkTimers requires every timer of a to be after now and no later than
// the longest wait it may take, and every retry budget to fit the REQ's
// 4 bits.
func checkTimers(t *testing.T, a *Agent, now time.Time) {
	limit := duration(max(a.cfg.MaxPeerTimeout, 20)) + 2*duration(a.cfg.PacketLifeTime)
	for id, c := range a.conns {
		if c.deadline.IsZero() {
			continue
		}
		// Plain ifs: this runs for every connection after every MAD and
		// timer, where require's caller walk would cost most of an input.
		if !c.deadline.After(now) || c.deadline.Sub(now) > limit || c.retries > 15 {
			t.Fatalf("connection %#x in %v: timer in %v (at most %v), %d retries (at most 15)", id, c.state, c.deadline.Sub(now), limit, c.retries)
		}
	}
}

// receiveChecked has a receive b from the capture's client at t0 and
// checks what FuzzReceive says of one MAD.
func receiveChecked(t *testing.T, a *Agent, b []byte) {
	before, beforeStates := snapshot(a), states(a)
	dropped := a.ctr.Dropped
	a.Receive(t0, capClient, b)
	outs, evs := takeAll(a)
	ch := changes(beforeStates, a)
	h, msg, err := packet.DecodeCMHeader(b)
	attr := packet.CMAttr(h.AttrID)
	if _, known := recvTransitions[attr]; err != nil || h.Method != packet.MethodSend || !known && attr != packet.AttrMRA {
		require.Equal(t, dropped+1, a.ctr.Dropped, "a MAD the CM cannot take is counted")
		require.Empty(t, outs, "a MAD the CM cannot take is not answered")
		require.Empty(t, evs)
		require.Empty(t, ch)
		checkInvariants(t, a)
		return
	}
	require.LessOrEqual(t, len(ch), 1, "%v: one connection changes at most: %v", attr, ch)
	checkEvents(t, recvTransitions[attr], ch, evs, attr.String())
	require.LessOrEqual(t, len(outs), 2, "%v: replies", attr)
	for _, o := range outs {
		checkReply(t, a, before, attr, h.TID, msg, o)
	}
	checkTimers(t, a, t0)
	checkInvariants(t, a)
}

// checkReply checks one MAD that a sent in reply to a message of attribute
// attr, transaction tid and area msg, before being the connections before
// it: a whole CM Send MAD of a kind replyKinds allows, to the sender or
// the peer of the connection it names, whose fields say what its state
// and the message it answers say.
func checkReply(t *testing.T, a *Agent, before map[ID]conn, attr packet.CMAttr, tid uint64, msg []byte, o Out) {
	rh, rmsg, err := packet.DecodeCMHeader(o.MAD[:])
	require.NoError(t, err)
	kind := packet.CMAttr(rh.AttrID)
	require.Contains(t, replyKinds[attr], kind, "%v answered with %v", attr, kind)
	require.Equal(t, packet.CMHeader(kind, rh.TID), rh, "%v: header", kind)
	reply, err := packet.DecodeCMMessage(rmsg, kind)
	require.NoError(t, err)
	require.Equal(t, o.MAD[:], cmMAD(rh.TID, reply), "%v: a field out of its bits or a reserved bit set", kind)
	// A reply goes to the sender, or to the peer of the connection it
	// names (the agent answers a message of a connection it has there).
	named := func(id uint32) *conn { return a.conns[ID(id)] }
	to := func(c *conn) {
		if c == nil || o.To != c.peer {
			require.Equal(t, capClient, o.To, "%v: destination", kind)
		}
	}
	switch r := reply.(type) {
	case *packet.MRA:
		c := named(r.LocalCommID)
		require.NotNil(t, c, "MRA for no connection")
		switch r.MessageMRAed {
		case packet.MsgREQ: // a REQ again while the consumer decides (12.9.5.2)
			require.True(t, c.passive && c.state == StateMRASent && r.RemoteCommID == c.req.LocalCommID, "MRA of a REQ in %v", c.state)
		case packet.MsgREP: // a REP again before ConfirmREP
			require.True(t, !c.passive && c.state == StateREPRcvd && r.RemoteCommID == c.rep.LocalCommID, "MRA of a REP in %v", c.state)
		default:
			require.Fail(t, "MRA of neither REQ nor REP", "%d", r.MessageMRAed)
		}
		require.Equal(t, a.cfg.ServiceTimeout, r.ServiceTimeout)
		require.Equal(t, c.tid, rh.TID, "MRA: the transaction of the REQ")
		to(c)
	case *packet.RTU: // a REP again once established: the RTU again
		c := named(r.LocalCommID)
		require.NotNil(t, c, "RTU for no connection")
		require.True(t, !c.passive && c.state == StateEstablished && before[c.id].state == StateEstablished, "RTU in %v", c.state)
		require.Equal(t, c.rep.LocalCommID, r.RemoteCommID)
		require.Equal(t, c.tid, rh.TID)
		to(c)
	case *packet.DREQ: // 12.9.8.4: the established connection of a stale peer QP
		c := named(r.LocalCommID)
		require.NotNil(t, c, "DREQ for no connection")
		require.Equal(t, StateEstablished, before[c.id].state)
		require.Equal(t, StateDREQSent, c.state)
		require.Equal(t, c.remoteCommID(), r.RemoteCommID)
		require.Equal(t, c.remoteQPN(), r.RemoteQPN)
		require.Equal(t, a.tid(c.id), rh.TID)
		to(c)
	case *packet.DREP:
		var d packet.DREQ
		require.NoError(t, d.Decode(msg))
		require.Equal(t, tid, rh.TID, "DREP: the DREQ's transaction")
		require.Equal(t, d.LocalCommID, r.RemoteCommID)
		require.Equal(t, d.RemoteCommID, r.LocalCommID)
		old, had := before[ID(d.RemoteCommID)]
		if had && old.remoteCommID() == d.LocalCommID {
			// A DREQ of a connection: it is in time-wait now.
			require.Equal(t, StateTimeWait, a.State(ID(d.RemoteCommID)), "DREP of a connection in %v", old.state)
		}
		to(named(r.LocalCommID))
	case *packet.REJ:
		require.Equal(t, tid, rh.TID, "REJ: the transaction of what it rejects")
		switch attr {
		case packet.AttrREQ:
			var q packet.REQ
			require.NoError(t, q.Decode(msg))
			require.Equal(t, uint8(packet.MsgREQ), r.MessageRejected)
			require.Equal(t, q.LocalCommID, r.RemoteCommID)
			switch r.Reason {
			case packet.RejStaleConn: // a peer QP another connection has, or a REQ in time-wait
				if r.LocalCommID != 0 {
					c := named(r.LocalCommID)
					require.NotNil(t, c)
					require.Equal(t, StateTimeWait, c.state)
					require.Equal(t, remoteKey{q.LocalCommID, q.LocalCAGUID}, c.remoteKey())
				}
			case packet.RejInvalidServiceID:
				require.NotContains(t, a.listeners, q.ServiceID)
				require.Zero(t, r.LocalCommID)
			case packet.RejInvalidTransportType:
				require.Contains(t, a.listeners, q.ServiceID)
				require.Greater(t, q.TransportServiceType, uint8(packet.CMTransportUC))
				require.Zero(t, r.LocalCommID)
			default:
				require.Fail(t, "REJ of a REQ", "reason %v", r.Reason)
			}
		case packet.AttrREP:
			var p packet.REP
			require.NoError(t, p.Decode(msg))
			require.Equal(t, uint8(packet.MsgREP), r.MessageRejected)
			require.Equal(t, p.RemoteCommID, r.LocalCommID)
			require.Equal(t, p.LocalCommID, r.RemoteCommID)
			old, had := before[ID(p.RemoteCommID)]
			switch r.Reason {
			case packet.RejInvalidCommID: // no active connection of that ID
				require.False(t, had && !old.passive, "REJ invalid comm ID of connection %#x in %v", p.RemoteCommID, old.state)
			case packet.RejStaleConn: // the REP names a peer QP another connection has
				require.True(t, had && !old.passive && old.state == StateREQSent, "REJ stale of connection %#x", p.RemoteCommID)
				require.Equal(t, StateREQSent, a.State(ID(p.RemoteCommID)), "the REQ stays for its retries")
			default:
				require.Fail(t, "REJ of a REP", "reason %v", r.Reason)
			}
		}
		require.LessOrEqual(t, r.RejectedInfoLen, uint8(packet.REJARISize))
		require.Equal(t, capClient, o.To, "a REJ answers its sender")
	case *packet.SIDRREP: // 12.11.2: a service nobody listens on
		var s packet.SIDRREQ
		require.NoError(t, s.Decode(msg))
		require.Equal(t, tid, rh.TID)
		require.Equal(t, &packet.SIDRREP{RequestID: s.RequestID, Status: packet.SIDRServiceIDNotSup, ServiceID: s.ServiceID}, r)
		require.NotContains(t, a.sidrListeners, s.ServiceID)
		require.Equal(t, capClient, o.To)
	default:
		require.Fail(t, "unexpected reply", "%v", kind)
	}
}

// drainTimers runs a's timers until none is left, checking each run: it
// resends only the message of a connection still waiting for its answer,
// byte for byte, rejects with reason Timeout only a connection its retries
// ended, and changes states only as tickTransitions allows.
func drainTimers(t *testing.T, a *Agent) {
	now := t0
	for range 17 * a.cfg.MaxConns {
		d, ok := a.Deadline()
		if !ok {
			break
		}
		before := states(a)
		now = d
		a.Tick(now)
		outs, evs := takeAll(a)
		ch := changes(before, a)
		checkEvents(t, tickTransitions, ch, evs, "timer")
		for _, o := range outs {
			rh, rmsg, err := packet.DecodeCMHeader(o.MAD[:])
			require.NoError(t, err)
			kind := packet.CMAttr(rh.AttrID)
			if kind == packet.AttrREJ {
				var r packet.REJ
				require.NoError(t, r.Decode(rmsg))
				require.Equal(t, packet.RejTimeout, r.Reason)
				require.Equal(t, transition{before[ID(r.LocalCommID)], StateIdle}, ch[ID(r.LocalCommID)], "REJ Timeout")
				continue
			}
			// A retransmission: the message of the connection it names
			// (local communication ID or request ID), as it was sent.
			require.Contains(t, []packet.CMAttr{packet.AttrREQ, packet.AttrREP, packet.AttrDREQ, packet.AttrSIDRREQ}, kind, "a timer sent it")
			c := a.conns[ID(binary.BigEndian.Uint32(rmsg))]
			require.NotNil(t, c, "%v resent for no connection", kind)
			var want []byte
			switch kind {
			case packet.AttrREQ:
				require.Equal(t, StateREQSent, c.state)
				want = cmMAD(c.tid, &c.req)
			case packet.AttrREP:
				require.Equal(t, StateREPSent, c.state)
				want = cmMAD(c.tid, &c.rep)
			case packet.AttrDREQ:
				require.Equal(t, StateDREQSent, c.state)
				want = cmMAD(a.tid(c.id), &c.dreq)
			case packet.AttrSIDRREQ:
				require.Equal(t, StateSIDRREQSent, c.state)
				want = cmMAD(c.tid, &c.sreq)
			}
			require.Equal(t, want, o.MAD[:], "%v resent", kind)
			require.Equal(t, c.peer, o.To)
		}
		checkTimers(t, a, now)
		checkInvariants(t, a)
	}
	_, ok := a.Deadline()
	require.False(t, ok, "timers still run after %d runs", 17*a.cfg.MaxConns)
	for id, c := range a.conns {
		require.Contains(t, []State{StateREQRcvd, StateMRASent, StateREPRcvd, StateEstablished, StateSIDRREQRcvd}, c.state,
			"connection %#x is left waiting for nobody", id)
	}
}
