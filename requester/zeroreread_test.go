package requester

import (
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// TestSRNoEmptyRereadAfterRNR: selective repeat. A SEND draws an RNR NAK;
// the READs posted after it (A: 2 packets, B: 1 packet) wait in the
// responder's out-of-order buffer and execute once the SEND is accepted
// after the RNR wait. B's only response arrives, A's last response is
// lost. The requester must ask again for A's missing part only: B has all
// its data, and a READ request for it would ask for 0 bytes at B's end
// (VA + length) at B's PSN, a request the original at that PSN never made.
func TestSRNoEmptyRereadAfterRNR(t *testing.T) {
	const p0 = 0x500
	cfg := baseConfig(1024, p0)
	cfg.SelectiveRepeat = true
	cfg.SigAll = true
	h, f, rm := withResponder(t, cfg, 1<<16, verbs.AccessRemoteRead, 9)
	f.sr.on = true
	f.rq = 0 // the SEND draws an RNR NAK
	h.post(&verbs.SendWR{ID: 0, Opcode: verbs.WRSend, SGList: []verbs.SGE{{Addr: baseA, Length: 100, LKey: lkeyA}}})
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, RemoteAddr: rbase, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA + 4096, Length: 1452, LKey: lkeyA}}})
	h.post(&verbs.SendWR{ID: 2, Opcode: verbs.WRRDMARead, RemoteAddr: rbase + 8192, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA + 8192, Length: 888, LKey: lkeyA}}})
	for _, b := range h.drain() {
		f.handle(b)
	}
	for _, o := range f.take() {
		h.recv(o) // the RNR NAK (and any hole report)
	}
	f.rq = -1
	var b []byte
	for range 10 { // the RNR wait ends; the SEND goes again
		h.now = h.r.Deadline()
		h.r.OnTimeout(h.now)
		if b = h.next(); b != nil {
			break
		}
	}
	require.NotNil(t, b)
	require.Equal(t, packet.PSN(p0), parse(t, b).PSN())
	f.handle(b) // executes the SEND, then the buffered READs
	var lastA []byte
	for _, o := range f.take() {
		p := parse(t, o)
		if p.Opcode() == packet.RCRDMAReadResponseLast {
			lastA = o // lost
			continue
		}
		h.recv(o)
	}
	require.NotNil(t, lastA)
	h.now = h.now.Add(time.Microsecond)
	for b := h.next(); b != nil; b = h.next() {
		p := parse(t, b)
		if p.Opcode() == packet.RCRDMAReadRequest {
			require.NotEqual(t, packet.PSN(p0+3), p.PSN(), "READ B asked again for %d bytes at VA+%d",
				p.RETH().DMALen(), p.RETH().VA()-(rbase+8192))
		}
		f.handle(b)
	}
	for _, o := range f.take() {
		h.recv(o)
	}
	require.Equal(t, []uint64{0, 1, 2}, h.cq.ids())
	require.Equal(t, rm.buf[0:1452], h.mem[lkeyA].buf[4096:4096+1452])
	require.Equal(t, rm.buf[8192:8192+888], h.mem[lkeyA].buf[8192:8192+888])
}
