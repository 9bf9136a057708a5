package requester

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

type testAH netip.AddrPort

func (a testAH) Dest() netip.AddrPort { return netip.AddrPort(a) }

func (a testAH) TrafficClass() uint8 { return 0 }

var udDest = testAH(netip.MustParseAddrPort("192.0.2.9:4791"))

func newUnreliable(ud bool) (*Unreliable, fakeMem, *fakeCQ) {
	mem, cq := fakeMem{}, &fakeCQ{}
	mem.add(1, 0x1000, 64<<10, 0, 3)
	u := NewUnreliable(UConfig{UD: ud, QPN: testQPN, DestQPN: peerQPN, Dest: netip.AddrPortFrom(pseudo.Dst, packet.UDPPort),
		PMTU: 1024, SQPSN: 50, PKey: testPKey, QKey: 0x8000_0007, Pseudo: pseudo, MaxWR: 8, MaxSGE: 2, MaxInline: 16}, mem, cq)
	return u, mem, cq
}

// drain returns every packet the send queue builds, parsed and with its
// ICRC checked against the pseudo-header of its destination; each is
// reported sent as soon as it is built, as an owner whose write takes it.
func drain(t *testing.T, u *Unreliable) []packet.Packet {
	var out []packet.Packet
	for {
		buf := make([]byte, 2048)
		n, dst, _ := u.NextPacket(t0, buf)
		if n == 0 {
			return out
		}
		u.Sent(1)
		p, err := packet.Parse(buf[:n])
		require.NoError(t, err)
		ph := pseudo
		ph.Dst, ph.DstPort = dst.Addr(), dst.Port()
		require.NoError(t, ph.CheckICRC(buf[:n]))
		out = append(out, p)
	}
}

func TestUnreliableUCSegments(t *testing.T) {
	u, mem, cq := newUnreliable(false)
	require.NoError(t, u.Post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWriteWithImm, Flags: verbs.SendSignaled, Imm: 9,
		RemoteAddr: 0xABC, RKey: 5, SGList: []verbs.SGE{{Addr: 0x1000, Length: 2500, LKey: 1}}}))
	require.NoError(t, u.Post(&verbs.SendWR{ID: 2, Opcode: verbs.WRSend, SGList: []verbs.SGE{{Addr: 0x1000, Length: 10, LKey: 1}}}))
	ps := drain(t, u)
	var ops []packet.Opcode
	var pay []byte
	for i, p := range ps {
		ops = append(ops, p.Opcode())
		require.Equal(t, packet.PSN(50+i), p.PSN())
		require.Equal(t, uint32(peerQPN), p.DestQP())
		require.False(t, p.AckReq(), "UC asks for no ACK")
		if i < 3 {
			pay = append(pay, p.Payload()...)
		}
	}
	require.Equal(t, []packet.Opcode{packet.UCRDMAWriteFirst, packet.UCRDMAWriteMiddle, packet.UCRDMAWriteLastWithImm, packet.UCSendOnly}, ops)
	require.Equal(t, uint32(2500), ps[0].RETH().DMALen())
	require.True(t, bytes.Equal(mem[1].buf[:2500], pay))
	require.Equal(t, []uint64{1}, cq.ids(), "only the signaled WR completes")
	require.Equal(t, packet.PSN(54), u.SQPSN())
}

func TestUnreliableUD(t *testing.T) {
	u, _, cq := newUnreliable(true)
	require.ErrorIs(t, u.Post(&verbs.SendWR{Opcode: verbs.WRSend, AH: udDest, SGList: []verbs.SGE{{Addr: 0x1000, Length: 1025, LKey: 1}}}), ErrUDTooLong)
	require.ErrorIs(t, u.Post(&verbs.SendWR{Opcode: verbs.WRRDMAWrite, AH: udDest}), ErrUnsupportedOpcode)
	require.ErrorIs(t, u.Post(&verbs.SendWR{Opcode: verbs.WRSend}), ErrNoAH)
	require.NoError(t, u.Post(&verbs.SendWR{ID: 7, Opcode: verbs.WRSendWithImm, Imm: 4, AH: udDest, RemoteQPN: 0x99, RemoteQKey: 0x1111,
		Flags: verbs.SendSignaled | verbs.SendInline, InlineData: []byte("hello")}))
	require.NoError(t, u.Post(&verbs.SendWR{ID: 8, Opcode: verbs.WRSend, AH: udDest, RemoteQPN: 0x99, RemoteQKey: 0x8000_0000,
		Flags: verbs.SendSignaled, SGList: []verbs.SGE{{Addr: 0x1000, Length: 1024, LKey: 1}}}))
	require.NoError(t, u.Post(&verbs.SendWR{ID: 9, Opcode: verbs.WRSend, AH: udDest, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{{Addr: 0x1000, Length: 8, LKey: 77}}}))
	ps := drain(t, u)
	require.Len(t, ps, 2)
	require.Equal(t, packet.UDSendOnlyWithImmediate, ps[0].Opcode())
	require.Equal(t, uint32(0x1111), ps[0].DETH().QKey())
	require.Equal(t, uint32(testQPN), ps[0].DETH().SrcQP())
	require.Equal(t, uint32(0x99), ps[0].DestQP())
	require.Equal(t, []byte("hello"), ps[0].Payload())
	require.Equal(t, uint32(0x8000_0007), ps[1].DETH().QKey(), "a controlled Q_Key is replaced by the QP's")
	require.Equal(t, []uint64{7, 8, 9}, cq.ids())
	require.Equal(t, verbs.WCLocProtErr, cq.wcs[2].Status, "a bad L_Key fails the WR")
	st, failed := u.Failed()
	require.True(t, failed)
	require.Equal(t, verbs.WCLocProtErr, st)
}

// FuzzUnreliablePost: any sequence of work requests either is refused by
// Post or yields packets that parse, carry consecutive PSNs and a valid
// ICRC, and form, message by message, the accepted work requests in
// posting order: a SEND or a WRITE as its opcode says (for UD one
// packet), with the WRITE's RETH, carrying exactly the bytes of its SGE;
// a work request with a bad L_Key sends nothing and stops the queue
// (unless it has no bytes: rxe copy_data looks up no key for those).
// Every work request (all are signaled) completes exactly once, in
// posting order: the ones sent with success, the bad one with
// LOC_PROT_ERR, the rest flushed.
func FuzzUnreliablePost(f *testing.F) {
	f.Add(false, []byte{0, 10, 1, 200, 3, 4})
	f.Add(true, []byte{0, 4, 1, 255})
	f.Add(false, []byte{0, 100, 2, 80, 0x82, 3, 0, 1})
	f.Fuzz(func(t *testing.T, ud bool, prog []byte) {
		u, mem, cq := newUnreliable(ud)
		ops := []verbs.WROpcode{verbs.WRSend, verbs.WRSendWithImm, verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm, verbs.WRRDMARead}
		var queued, accepted []verbs.SendWR // accepted: all; queued: not yet seen on the wire
		var msg []byte                      // the payload of the message under way
		stopped := false                    // a WR with a bad L_Key reached the head
		for id := uint64(0); len(prog) >= 2; id++ {
			wr := verbs.SendWR{ID: id, Opcode: ops[int(prog[0])%len(ops)], Flags: verbs.SendSignaled, AH: udDest,
				RemoteAddr: 0x4000 + uint64(prog[1]), RKey: 5 + uint32(prog[0]),
				SGList: []verbs.SGE{{Addr: 0x1000, Length: uint32(prog[1]) * 16, LKey: 1}}}
			if prog[0]&0x80 != 0 {
				wr.SGList[0].LKey = 2
			}
			if u.Post(&wr) == nil {
				accepted = append(accepted, wr)
				queued = append(queued, wr)
			}
			prog = prog[2:]
			if len(prog) >= 2 && len(prog)%4 != 0 {
				continue
			}
			psn := u.SQPSN()
			for _, p := range drain(t, u) {
				if p.PSN() != psn {
					t.Fatalf("PSN %v, want %v", p.PSN(), psn)
				}
				psn = psn.Next()
				require.False(t, stopped, "a packet after a WR failed")
				require.NotEmpty(t, queued, "a packet of no WR")
				w := &queued[0]
				require.False(t, badLKey(w), "a packet of WR %d, whose L_Key is bad", w.ID)
				m := p.Mask()
				send := w.Opcode == verbs.WRSend || w.Opcode == verbs.WRSendWithImm
				require.Equal(t, send || ud, m&packet.MaskSend != 0, "WR %d (%v) sent as %v", w.ID, w.Opcode, p.Opcode())
				imm := w.Opcode == verbs.WRSendWithImm || w.Opcode == verbs.WRRDMAWriteWithImm
				require.Equal(t, imm && m&packet.MaskEnd != 0, p.ImmDt() != nil, "WR %d (%v) sent as %v", w.ID, w.Opcode, p.Opcode())
				if m&packet.MaskStart != 0 {
					require.Nil(t, msg, "a message starts inside WR %d", w.ID)
					msg = []byte{}
					if r := p.RETH(); r != nil {
						require.Equal(t, [3]uint64{w.RemoteAddr, uint64(w.RKey), uint64(w.SGList[0].Length)},
							[3]uint64{r.VA(), uint64(r.RKey()), uint64(r.DMALen())}, "RETH of WR %d", w.ID)
					}
				}
				require.NotNil(t, msg, "a message of WR %d without its first packet", w.ID)
				msg = append(msg, p.Payload()...)
				if m&packet.MaskEnd != 0 {
					want, _ := mem.Local(1, 0x1000, w.SGList[0].Length, 0)
					require.True(t, bytes.Equal(want, msg), "payload of WR %d", w.ID)
					msg = nil
					queued = queued[1:]
				} else {
					require.Equal(t, 1024, p.PayloadLen(), "a packet before the last of WR %d carries the PMTU", w.ID)
				}
			}
			if _, failed := u.Failed(); failed {
				stopped = true
			}
		}
		drain(t, u)
		u.Flush()
		if len(cq.wcs) != len(accepted) {
			t.Fatalf("%d completions for %d posted WRs", len(cq.wcs), len(accepted))
		}
		failed := false
		for i, wc := range cq.wcs {
			w := accepted[i]
			require.Equal(t, w.ID, wc.ID, "completions in posting order: %v", cq.ids())
			switch {
			case failed:
				require.Equal(t, verbs.WCWRFlushErr, wc.Status, "WR %d after the failed one", w.ID)
			case badLKey(&w):
				require.Equal(t, verbs.WCLocProtErr, wc.Status, "WR %d with a bad L_Key", w.ID)
				failed = true
			case i < len(accepted)-len(queued):
				require.Equal(t, verbs.WCSuccess, wc.Status, "WR %d sent", w.ID)
				require.Equal(t, w.SGList[0].Length, wc.ByteLen)
			default:
				require.Equal(t, verbs.WCWRFlushErr, wc.Status, "WR %d not sent", w.ID)
			}
		}
	})
}

// badLKey reports whether a work request of FuzzUnreliablePost fails for
// its L_Key: a bad one on an SGE with bytes to gather.
func badLKey(w *verbs.SendWR) bool { return w.SGList[0].LKey != 1 && w.SGList[0].Length > 0 }

// TestUnreliableOpcodes: a UC or UD send queue refuses the opcodes its QP
// type does not send, with an error that names what it does send.
func TestUnreliableOpcodes(t *testing.T) {
	for _, tc := range []struct {
		ud   bool
		op   verbs.WROpcode
		want string
	}{
		{true, verbs.WRRDMAWrite, "a UD QP sends SEND only"},
		{true, verbs.WRRDMARead, "a UD QP sends SEND only"},
		{false, verbs.WRRDMARead, "a UC QP sends SEND and RDMA WRITE"},
		{false, verbs.WRAtomicFetchAndAdd, "a UC QP sends SEND and RDMA WRITE"},
	} {
		u, _, _ := newUnreliable(tc.ud)
		err := u.Post(&verbs.SendWR{Opcode: tc.op, AH: udDest})
		require.ErrorIs(t, err, ErrUnsupportedOpcode)
		require.ErrorContains(t, err, tc.want)
		require.NotContains(t, err.Error(), "RC")
	}
}

// classAH is an address handle with a traffic class.
type classAH struct {
	dest netip.AddrPort
	tc   uint8
}

func (a classAH) Dest() netip.AddrPort { return a.dest }

func (a classAH) TrafficClass() uint8 { return a.tc }

// TestUnreliableTrafficClass: NextPacket gives each UD datagram the
// traffic class of its work request's address handle, copied when the
// request was posted; a UC QP's packets get 0 (its QP's address vector
// decides, in rxe).
func TestUnreliableTrafficClass(t *testing.T) {
	u, _, _ := newUnreliable(true)
	dst := netip.MustParseAddrPort("10.0.0.9:4791")
	for _, tc := range []uint8{0x48, 0} {
		require.NoError(t, u.Post(&verbs.SendWR{ID: uint64(tc), Opcode: verbs.WRSend, AH: classAH{dst, tc}, RemoteQPN: 5, RemoteQKey: 7,
			SGList: []verbs.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}))
	}
	buf := make([]byte, 2048)
	for _, want := range []uint8{0x48, 0} {
		n, to, tc := u.NextPacket(t0, buf)
		require.Positive(t, n)
		require.Equal(t, dst, to)
		require.Equal(t, want, tc)
	}
	uc, _, _ := newUnreliable(false)
	require.NoError(t, uc.Post(&verbs.SendWR{Opcode: verbs.WRSend, SGList: []verbs.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}))
	n, _, tc := uc.NextPacket(t0, buf)
	require.Positive(t, n)
	require.Zero(t, tc)
}
