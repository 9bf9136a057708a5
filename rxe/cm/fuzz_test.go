package cm

import (
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// checkInvariants: every connection that waits for the peer has a timer,
// every connection that waits for the consumer has none, and the index of
// passive connections by remote ID points at live passive connections.
func checkInvariants(t *testing.T, a *Agent) {
	for id, c := range a.conns {
		if c.id != id || c.state == StateIdle {
			t.Fatalf("conn %d: id %d state %v", id, c.id, c.state)
		}
		switch c.state {
		case StateREQSent, StateREPSent, StateDREQSent, StateTimeWait, StateSIDRREQSent:
			if c.deadline.IsZero() {
				t.Fatalf("conn %d in %v without a timer", id, c.state)
			}
		case StateREQRcvd, StateMRASent, StateREPRcvd, StateEstablished, StateSIDRREQRcvd:
			if !c.deadline.IsZero() {
				t.Fatalf("conn %d in %v with a timer", id, c.state)
			}
		}
	}
	for k, id := range a.byRemote {
		c := a.conns[id]
		if c == nil || !c.passive || c.remoteKey() != k {
			t.Fatalf("stale remote index %v → %d", k, id)
		}
	}
	// The SIDR index holds exactly the SIDR_REQs waiting for the consumer.
	pending := 0
	for id, c := range a.conns {
		if c.state == StateSIDRREQRcvd {
			pending++
			if got, ok := a.bySIDR[sidrKey{c.peer, c.sreq.RequestID}]; !ok || got != id {
				t.Fatalf("SIDR request %d is not in the SIDR index", id)
			}
		}
	}
	if len(a.bySIDR) != pending {
		t.Fatalf("SIDR index holds %d requests, want %d", len(a.bySIDR), pending)
	}
	// The remote QP index holds every connection that has its peer's QP
	// (passive from the REQ, active from the REP) until time-wait, and
	// nothing else.
	indexed := 0
	for id, c := range a.conns {
		want := c.state != StateTimeWait && !c.isSIDR() && (c.passive || c.state == StateREPRcvd || c.state == StateEstablished ||
			c.state == StateDREQSent)
		if got, ok := a.byQP[c.remoteQP()]; want && (!ok || got != id) {
			t.Fatalf("conn %d in %v is not in the remote QP index", id, c.state)
		}
		if want {
			indexed++
		}
	}
	if len(a.byQP) != indexed {
		t.Fatalf("remote QP index holds %d connections, want %d", len(a.byQP), indexed)
	}
	if a.Len() > a.cfg.MaxConns {
		t.Fatalf("%d connections, max %d", a.Len(), a.cfg.MaxConns)
	}
}

// FuzzAgent drives a client and a server agent with a byte program:
// connects, service ID resolutions, disconnects, shutdowns (a device going away), time steps, lost, duplicated and late MADs, and
// MADs made from fuzz bytes injected into either side. The agents never
// panic, every MAD they send decodes, the invariants hold after every step,
// and once the wire is lossless and every connection is disconnected, time
// empties both agents.
func FuzzAgent(f *testing.F) {
	f.Add([]byte{0, 3, 3, 1, 4, 4})
	f.Add([]byte{0, 3, 0, 0xFA, 4, 0xF9, 4})
	f.Add([]byte{0, 0x16, 3, 0x25, 4, 2, 4})
	mad := make([]byte, packet.MADSize)
	packet.EncodeCM(mad, 9, &packet.REQ{ServiceID: service, MaxCMRetries: 15, RemoteCMResponseTimeout: 31})
	f.Add(append([]byte{5, 0}, mad...))
	f.Add([]byte{0x60, 0x0E, 3, 0x20, 4, 0x36, 0xE0, 0x16, 4})      // SIDR: lost, duplicated, with a connect
	f.Add([]byte{0x1E, 0xA0, 3, 0x80, 0x0E, 4, 0x26, 0x20, 0x6, 4}) // SIDR: late, then as the REP goes
	packet.EncodeCM(mad, 9, &packet.SIDRREQ{RequestID: 1, ServiceID: udService})
	f.Add(append([]byte{5, 0}, mad...))
	packet.EncodeCM(mad, 9, &packet.SIDRREP{RequestID: 1, QPN: 5})
	f.Add(append([]byte{0x20, 7, 0}, mad...))
	f.Fuzz(func(t *testing.T, prog []byte) {
		w := newWire(t)
		w.client.cfg.MaxConns, w.server.cfg.MaxConns = 8, 8
		mode := deliver
		w.fate = func(string, packet.CMAttr, int) fate { return mode }
		for len(prog) > 0 {
			op := prog[0]
			prog = prog[1:]
			switch op & 7 {
			case 0:
				if op&0x20 != 0 { // a service ID resolution
					_, _ = w.client.ResolveSIDR(w.now, serverAddr, testSIDRREQ(), sidrWait, uint8(op>>6))
					break
				}
				// QPs 0x11 to 0x14: a QP that another connection has
				// makes a stale connection.
				req := testREQ()
				req.LocalQPN += uint32(op>>3) & 3
				_, _ = w.client.Connect(w.now, serverAddr, req)
			case 1, 2:
				a := w.client
				if op&7 == 2 {
					a = w.server
				}
				if op>>3 == 31 { // the device goes away
					a.Shutdown(w.now)
					require.Zero(t, a.Len(), "Shutdown forgets every connection")
					_, ok := a.Deadline()
					require.False(t, ok, "no timer after Shutdown")
					break
				}
				for id := range a.conns {
					_ = a.Disconnect(w.now, id, nil)
				}
			case 3:
				w.advance(time.Duration(op>>3) * time.Millisecond)
			case 4:
				w.advance(time.Hour)
			case 5, 7:
				b := make([]byte, packet.MADSize)
				n := copy(b, prog)
				prog = prog[n:]
				copy(b, []byte{1, 7, 2, 3}) // a CM Send MAD, attribute from the bytes
				to, from := w.server, clientAddr
				if op&2 != 0 {
					to, from = w.client, serverAddr
				}
				to.Receive(w.now, from, b)
			case 6:
				mode = fate(op>>3) % 4
			}
			w.pump()
			checkInvariants(t, w.client)
			checkInvariants(t, w.server)
		}
		mode = deliver
		for _, a := range []*Agent{w.client, w.server} {
			for id, c := range a.conns {
				if c.state == StateEstablished {
					_ = a.Disconnect(w.now, id, nil)
				}
			}
		}
		w.pump()
		for i := 0; i < 5000 && (w.client.Len() > 0 || w.server.Len() > 0); i++ {
			w.advance(time.Hour)
			for _, a := range []*Agent{w.client, w.server} {
				for id, c := range a.conns {
					if c.state == StateEstablished {
						_ = a.Disconnect(w.now, id, nil)
					}
				}
			}
			w.pump()
		}
		if w.client.Len() > 0 || w.server.Len() > 0 {
			t.Fatalf("agents keep %d and %d connections", w.client.Len(), w.server.Len())
		}
	})
}

// cmMessages returns a fresh message of each CM attribute the codec
// decodes, with its attribute.
func cmMessages() []interface {
	packet.CMMessage
	Decode([]byte) error
} {
	return []interface {
		packet.CMMessage
		Decode([]byte) error
	}{new(packet.REQ), new(packet.MRA), new(packet.REJ), new(packet.REP), new(packet.RTU), new(packet.DREQ),
		new(packet.DREP), new(packet.SIDRREQ), new(packet.SIDRREP)}
}

// FuzzCMMessages: every CM message decoder the agent relies on (package
// packet's; the agent decodes each MAD it receives with them) takes bytes
// of any length without panicking, refuses fewer than a message area
// (232 bytes, IBA 16.7.1) with ErrMADTruncated, reads nothing past it,
// and decode(encode(x)) == x for every x it decodes. The RDMA CM IP
// header of a REQ's private data (Annex A11.2.2.1) decodes without
// panicking, refuses fewer than 36 bytes, and what it accepts has major
// version 0 and addresses of the IP version it names. (packet's FuzzCMMAD
// covers whole MADs only.)
func FuzzCMMessages(f *testing.F) {
	for _, m := range cmMessages() {
		b := make([]byte, packet.CMDataSize)
		m.Encode(b)
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add(make([]byte, packet.CMDataSize-1))
	f.Add(make([]byte, packet.CMDataSize+9))
	ip := make([]byte, packet.CMIPHeaderSize)
	(&packet.CMIPHeader{Src: clientAddr, Dst: serverAddr, SrcPort: 7}).Encode(ip)
	f.Add(ip)
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range cmMessages() {
			err := m.Decode(b)
			if len(b) < packet.CMDataSize {
				require.ErrorIs(t, err, packet.ErrMADTruncated, "%v of %d bytes", m.Attr(), len(b))
				continue
			}
			require.NoError(t, err, "%v", m.Attr())
			// Only the message area counts.
			short := cmMessages()
			for _, s := range short {
				if s.Attr() == m.Attr() {
					require.NoError(t, s.Decode(b[:packet.CMDataSize]))
					require.Equal(t, m, s, "%v reads past its message area", m.Attr())
				}
			}
			enc := make([]byte, packet.CMDataSize)
			m.Encode(enc)
			for _, again := range cmMessages() {
				if again.Attr() == m.Attr() {
					require.NoError(t, again.Decode(enc))
					require.Equal(t, m, again, "%v: decode(encode(x)) != x", m.Attr())
				}
			}
		}
		var h packet.CMIPHeader
		err := h.Decode(b)
		switch {
		case len(b) < packet.CMIPHeaderSize:
			require.ErrorIs(t, err, packet.ErrMADTruncated)
		case err == nil:
			require.Zero(t, h.MajorVersion)
			require.True(t, h.IPVersion == 4 && h.Src.Is4() && h.Dst.Is4() || h.IPVersion == 6 && h.Src.Is6() && h.Dst.Is6(),
				"IP version %d with %v → %v", h.IPVersion, h.Src, h.Dst)
		default:
			require.ErrorIs(t, err, packet.ErrCMIPHeader)
		}
	})
}
