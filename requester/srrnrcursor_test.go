package requester

import (
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// TestSRRNRCursorBehindHead: selective repeat. An RNR NAK rewinds the send
// cursor to the SEND it names; the responder holds the WRITE sent after
// it; the READ request after that is lost. After the RNR wait the SEND
// goes again, the responder executes it and drains the WRITE, and the ACKs
// complete the SEND and the WRITE (srAdvance) while the cursor still
// points at the WRITE. srWillSend moves the cursor up first (catchUp);
// it used to index the ring at the cursor before Receive's catchUp did,
// and Receive panicked with a negative index.
func TestSRRNRCursorBehindHead(t *testing.T) {
	p0 := packet.PSN(0x100)
	cfg := baseConfig(1024, p0)
	cfg.SelectiveRepeat = true
	h, f, _ := withResponder(t, cfg, 64<<10, verbs.AccessRemoteWrite|verbs.AccessRemoteRead, 1)
	f.sr.on = true
	f.rnrCode = 1

	// A WRITE answered at once gives the RTT sample srWatchRead needs.
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA, Length: 100, LKey: lkeyA}}})
	for _, b := range h.drain() {
		f.handle(b)
	}
	h.now = h.now.Add(50e3)
	for _, o := range f.take() {
		h.recv(o)
	}
	require.True(t, h.r.rec.rtt.Valid())
	require.Equal(t, []uint64{1}, h.cq.ids())

	// SEND (no receive WQE at the responder: RNR NAK), WRITE, READ.
	f.rq = 0
	h.post(&verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{{Addr: baseA, Length: 100, LKey: lkeyA}}})
	h.post(&verbs.SendWR{ID: 3, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA, Length: 100, LKey: lkeyA}}})
	h.post(&verbs.SendWR{ID: 4, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA + 8192, Length: 2048, LKey: lkeyA}}})
	out := h.drain()
	require.Len(t, out, 3)
	require.Equal(t, packet.RCRDMAReadRequest, parse(t, out[2]).Opcode())
	f.handle(out[0]) // RNR NAK
	f.handle(out[1]) // held out of order: hole report
	// out[2], the READ request, is lost.
	h.now = h.now.Add(50e3)
	for _, o := range f.take() { // RNR NAK, hole report
		h.recv(o)
	}
	require.True(t, h.r.rnrWait.Armed(), "RNR wait")
	require.Equal(t, h.r.head, h.r.cur, "rewound to the SEND")

	// After the RNR wait the SEND goes again; the responder has a WQE now.
	h.now = h.r.rnrWait.When()
	h.r.OnTimeout(h.now)
	f.rq = -1
	b := h.next()
	require.Equal(t, packet.RCSendOnly, parse(t, b).Opcode())
	f.handle(b) // executes the SEND, drains the WRITE: ACK(SEND), ACK(WRITE)
	h.now = h.now.Add(50e3)
	require.NotPanics(t, func() {
		for _, o := range f.take() {
			h.recv(o)
		}
	})
}
