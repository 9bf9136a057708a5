package cm

import (
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// TestMRAOnce: only the first MRA for a message stretches its response
// timer (kernel cm_mra_handler); a peer that keeps sending MRAs, and
// never a REP (or an RTU), used to push the timer out each time, so the
// retries never ran out and the attempt never ended. Now it ends within
// the retries, each waiting the first MRA's service timeout.
func TestMRAOnce(t *testing.T) {
	for _, passive := range []bool{false, true} {
		name := "REQ sent"
		if passive {
			name = "REP sent"
		}
		t.Run(name, func(t *testing.T) {
			w := newWire(t)
			a, peer, mra := w.client, serverAddr, packet.MRA{MessageMRAed: packet.MsgREQ, ServiceTimeout: 16}
			var id ID
			if passive {
				// The client's RTU never comes: the server waits in REP sent.
				w.fate = lose(map[string][]int{"client RTU": {0}})
				cid := w.connect()
				a, peer, id = w.server, clientAddr, w.serverID()
				require.Equal(t, StateREPSent, a.State(id))
				mra.LocalCommID, mra.MessageMRAed = uint32(cid), packet.MsgREP
			} else {
				var err error
				id, err = a.Connect(w.now, serverAddr, testREQ())
				require.NoError(t, err)
				_, _, _ = pollMAD(t, a, "the REQ")
			}
			mra.RemoteCommID = uint32(id)
			var mad [packet.MADSize]byte
			packet.EncodeCM(mad[:], 0x55, &mra)
			// One attempt waits the MRA's service timeout plus the packet
			// life time; 3 retries: 4 attempts, plus the one under way.
			wait := duration(16) + duration(10)
			limit := w.now.Add(5 * wait)
			sent := 0
			for w.now.Before(limit.Add(time.Minute)) && a.State(id) != StateIdle {
				a.Receive(w.now, peer, mad[:]) // every 100 ms, well within the timer
				w.now = w.now.Add(100 * time.Millisecond)
				a.Tick(w.now)
				for {
					if _, ok := a.Poll(); !ok {
						break
					}
					sent++
				}
			}
			require.Equal(t, StateIdle, a.State(id), "the attempt ends")
			require.False(t, w.now.After(limit.Add(100*time.Millisecond)), "within the retries of the first MRA's timeout")
			require.Equal(t, 4, sent, "3 retries and a REJ")
			var last Event
			for e, ok := a.NextEvent(); ok; e, ok = a.NextEvent() {
				last = e
			}
			require.Equal(t, EventTimeout, last.Kind)
			require.NotZero(t, a.Counters().Duplicates, "later MRAs count as duplicates")
		})
	}
}
