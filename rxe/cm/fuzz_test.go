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
		case StateREQSent, StateREPSent, StateDREQSent, StateTimeWait:
			if c.deadline.IsZero() {
				t.Fatalf("conn %d in %v without a timer", id, c.state)
			}
		case StateREQRcvd, StateMRASent, StateREPRcvd, StateEstablished:
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
	if a.Len() > a.cfg.MaxConns {
		t.Fatalf("%d connections, max %d", a.Len(), a.cfg.MaxConns)
	}
}

// FuzzAgent drives a client and a server agent with a byte program:
// connects, disconnects, shutdowns (a device going away), time steps, lost, duplicated and late MADs, and
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
				_, _ = w.client.Connect(w.now, serverAddr, testREQ())
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
