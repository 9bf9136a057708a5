package requester

import (
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// TestSetWindowWhileOutstanding: a window that shrinks below the packets
// outstanding sends nothing new, and nothing again, until the ACKs bring
// them below it; then one new packet at a time fills it. A window that
// grows lets the new packets up to it go at once. Under go-back-N and
// under selective repeat, at one explicit time (no timer runs).
func TestSetWindowWhileOutstanding(t *testing.T) {
	const pmtu, p0, pkts = 1024, packet.PSN(0x300), 96
	for _, sr := range []bool{false, true} {
		t.Run(map[bool]string{false: "go-back-n", true: "selective-repeat"}[sr], func(t *testing.T) {
			cfg := baseConfig(pmtu, p0)
			cfg.Window, cfg.SelectiveRepeat = 32, sr
			h := newHarness(t, cfg)
			h.mem.add(lkeyA, baseA, pkts*pmtu, verbs.AccessLocalWrite, 1)
			h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
				SGList: []verbs.SGE{{Addr: baseA, Length: pkts * pmtu, LKey: lkeyA}}})
			psns := func(out [][]byte) []packet.PSN {
				var ps []packet.PSN
				for _, b := range out {
					ps = append(ps, parse(t, b).PSN())
				}
				return ps
			}
			span := func(from packet.PSN, n int) []packet.PSN {
				var ps []packet.PSN
				for i := range n {
					ps = append(ps, from.Add(i))
				}
				return ps
			}
			require.Equal(t, span(p0, 32), psns(h.drain()), "a full window of 32")

			h.r.SetWindow(8, 0)
			w, parts := h.r.Limits()
			require.Equal(t, []int{8, 0}, []int{w, parts})
			require.Equal(t, 8, h.r.Counters().Recovery.Window)
			require.Empty(t, h.drain(), "32 outstanding: nothing new, nothing again")
			h.recv(ack(p0.Add(20)))
			require.Empty(t, h.drain(), "11 outstanding, still above 8")
			h.recv(ack(p0.Add(24)))
			require.Equal(t, span(p0.Add(32), 1), psns(h.drain()), "7 outstanding: one new packet fills the window")

			h.r.SetWindow(64, 0)
			require.Equal(t, 64, h.r.Counters().Recovery.Window)
			require.Equal(t, span(p0.Add(33), 56), psns(h.drain()), "8 outstanding: 56 new ones fill 64")
			h.recv(ack(p0.Add(88)))
			require.Equal(t, span(p0.Add(89), pkts-89), psns(h.drain()), "the rest")
			h.recv(ack(p0.Add(pkts - 1)))
			require.Equal(t, []uint64{1}, h.cq.ids())
			require.Equal(t, verbs.WCSuccess, h.cq.wcs[0].Status)
			require.Zero(t, h.r.Counters().Retransmits, "nothing went twice")
		})
	}
}

// TestSetWindowReadParts: READs asked after SetWindow are split into
// parts of its MaxReadPkts and kept within its window; SetWindow(0, 0)
// restores the defaults, 128 PSNs and whole READs; the data arrives whole.
func TestSetWindowReadParts(t *testing.T) {
	const pmtu, p0, size = 1024, 0x900, 40 * 1024
	h := newHarness(t, baseConfig(pmtu, p0))
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 0)
	f := newResponder(t, pmtu, p0)
	src := f.mem.add(rkey, rbase, size, verbs.AccessRemoteRead, 9)
	read := func(id uint64) {
		h.post(&verbs.SendWR{ID: id, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
			SGList: []verbs.SGE{{Addr: baseA, Length: size, LKey: lkeyA}}})
	}
	lens := func(sent [][]byte) []uint32 {
		var ls []uint32
		for _, b := range sent {
			ls = append(ls, parse(t, b).RETH().DMALen())
		}
		return ls
	}

	h.r.SetWindow(20, 16)
	read(1)
	first := h.drain()
	require.Equal(t, []uint32{16 * pmtu}, lens(first), "the second part waits for room in the window of 20")
	f.handle(first[0])
	rest := pumpLink(h, f)
	require.Equal(t, []uint32{16 * pmtu, 8 * pmtu}, lens(rest))
	require.Equal(t, src.buf, h.mem[lkeyA].buf[:size])

	h.r.SetWindow(0, 0)
	w, parts := h.r.Limits()
	require.Equal(t, []int{DefaultWindow, 0}, []int{w, parts})
	clear(h.mem[lkeyA].buf)
	read(2)
	sent := h.drain()
	require.Equal(t, []uint32{size}, lens(sent), "one request for the whole READ")
	f.handle(sent[0])
	require.Empty(t, pumpLink(h, f))
	require.Equal(t, []uint64{1, 2}, h.cq.ids())
	require.Equal(t, src.buf, h.mem[lkeyA].buf[:size])
}
