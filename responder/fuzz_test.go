package responder

import (
	"bytes"
	"encoding/binary"
	"hash"
	"hash/fnv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// Fuzz input layout:
//
//	byte 0: configuration (bits 0-1 PMTU 256<<n, bit 2 credits, bit 3 SRQ,
//	        bit 4 no resources, bit 5 no remote access, bit 6 tiny RQ buffers,
//	        bit 7 selective repeat with a 3-slot out-of-order buffer)
//	then records: [mode][len hi][len lo][len bytes]
//	mode bit 0: rewrite the PSN to ePSN + (mode>>2) - 16
//	mode bit 1: call Flush after the record
//
// Records that packet.Parse rejects are skipped; the device never hands
// those to a responder.

const (
	fuzzRSize = 8192
	fuzzLSize = 4096
)

func FuzzReceive(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) { fuzzReceive(t, in, -1, false) })
}

// FuzzReceiveDereg is FuzzReceive with both memory regions deregistered
// after the record bits 0-6 of the first input byte number has been
// received, before its responses are taken: from then on
// the responder must neither write them nor send READ response data
// (every READ response reads the region when it is built), whatever it
// had buffered out of order or queued before. With bit 7 set, the QP's
// remote access is taken away instead (SetAccess(0)): from then on the
// remote region must not change, not by a WRITE in progress (rxe
// check_op_valid runs on every packet), nor by one placed ahead
// (placeAhead) or held out of order and executed later.
func FuzzReceiveDereg(f *testing.F) {
	seeds := fuzzSeeds(f)
	for i, seed := range seeds {
		f.Add(append([]byte{byte(i % 4)}, seed...))
		if seed[0]&128 != 0 {
			f.Add(append([]byte{128 | 0}, seed...))
		}
	}
	// The regions go while the READ train of the seed that holds a
	// SEND's completion behind it is queued.
	f.Add(append([]byte{2}, seeds[heldSeed]...))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 2 {
			return
		}
		fuzzReceive(t, in[1:], int(in[0]&127), in[0]&128 != 0)
	})
}

// FuzzReceivePlaceAhead runs FuzzReceive's input on two responders under
// selective repeat (bit 7 of the configuration byte is ignored), one that
// places out-of-order requests ahead (placeAhead) and one that holds
// every one whole (noPlaceAhead), and requires of them, after every
// record, the same packets sent, completions, expected PSN, MSN and
// failure: placing a payload ahead changes where it waits, never what the
// responder does. Neither writes a local byte outside the receive WQEs'
// SGEs, nor outside its regions.
func FuzzReceivePlaceAhead(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		conf := in[0] | 128
		in = in[1:]
		sides := [2]*fuzzSide{newFuzzSide(conf, false), newFuzzSide(conf, true)}
		for len(in) >= 3 {
			mode, n := in[0], int(binary.BigEndian.Uint16(in[1:]))
			in = in[3:]
			n = min(n, len(in))
			rec := append([]byte(nil), in[:n]...)
			in = in[n:]
			if mode&1 != 0 && len(rec) >= packet.BTHSize {
				packet.BTH(rec).SetPSN(sides[0].r.EPSN().Add(int(mode>>2) - 16))
			}
			for _, sd := range sides {
				sd.receive(t, rec, mode&2 != 0)
			}
			a, b := sides[0], sides[1]
			require.Equal(t, b.sent, a.sent, "packets sent")
			require.Equal(t, b.sum.Sum64(), a.sum.Sum64(), "bytes of the packets sent")
			require.Equal(t, b.cq.wcs, a.cq.wcs, "completions")
			for _, wc := range a.cq.wcs[a.seen:] {
				// A SEND's message, in the WQE it completed: at most
				// two WQEs complete per record, and two in a row do
				// not share a byte (fuzzWQE).
				if wc.Status == verbs.WCSuccess && wc.Opcode == verbs.WCRecv {
					require.Equal(t, b.message(wc), a.message(wc), "message of receive WQE %d", wc.ID)
				}
			}
			a.seen = len(a.cq.wcs)
			require.Equal(t, b.r.EPSN(), a.r.EPSN(), "ePSN")
			require.Equal(t, b.r.MSN(), a.r.MSN(), "MSN")
			sa, fa := a.r.Failed()
			sb, fb := b.r.Failed()
			require.Equal(t, fb, fa, "failed")
			require.Equal(t, sb, sa, "failure status")
			require.Equal(t, b.r.FailState(), a.r.FailState())
			require.Equal(t, b.r.ooo.n, a.r.ooo.n, "requests held")
		}
		for _, sd := range sides {
			for i := range guard {
				require.Equal(t, byte(0xA5), sd.rback[i])
				require.Equal(t, byte(0xA5), sd.rback[guard+fuzzRSize+i])
				require.Equal(t, byte(0x5A), sd.lback[i])
				require.Equal(t, byte(0x5A), sd.lback[guard+fuzzLSize+i])
			}
			requireOutsideWQEs(t, sd.lback[guard:guard+fuzzLSize], sd.sgeLen)
		}
	})
}

// fuzzSide is one responder of FuzzReceivePlaceAhead, set up as
// fuzzReceive sets its one up, and what it has sent.
type fuzzSide struct {
	r            *Responder
	cfg          Config
	rq           *fakeRQ
	cq           *fakeCQ
	rback, lback []byte
	sgeLen       uint32
	posted       uint64
	sent         int         // packets sent
	sum          hash.Hash64 // of the bytes of every packet sent
	buf          []byte
	seen         int // completions whose message was compared
}

// message returns the first wc.ByteLen bytes of the buffers of receive
// WQE wc.ID.
func (sd *fuzzSide) message(wc verbs.WC) []byte {
	var out []byte
	for _, sg := range fuzzWQE(wc.ID, sd.sgeLen) {
		off := guard + int(sg.Addr-lva)
		out = append(out, sd.lback[off:off+int(sg.Length)]...)
	}
	return out[:wc.ByteLen]
}

// newFuzzSide returns a responder configured by conf as fuzzReceive
// configures one, holding every out-of-order request whole if whole.
func newFuzzSide(conf byte, whole bool) *fuzzSide {
	sd := &fuzzSide{cfg: Config{
		QPN: ourQPN, DestQPN: peerQPN, PMTU: 256 << (conf & 3), RQPSN: 100, MinRNRTimer: 3,
		MaxDestRdAtomic: 4, PKey: packet.DefaultPKey, Pseudo: respPseudo,
		Access:  verbs.AccessRemote,
		Credits: conf&4 != 0, SRQ: conf&8 != 0,
	}}
	if conf&16 != 0 {
		sd.cfg.MaxDestRdAtomic = 0
	}
	if conf&32 != 0 {
		sd.cfg.Access = 0
	}
	if conf&128 != 0 {
		sd.cfg.SelectiveRepeat, sd.cfg.OOOLimit = true, 3*(sd.cfg.PMTU+oooOverhead)
	}
	sd.rback = bytes.Repeat([]byte{0xA5}, guard+fuzzRSize+guard)
	sd.lback = bytes.Repeat([]byte{0x5A}, guard+fuzzLSize+guard)
	mem := &fakeMem{mrs: []*fakeMR{
		{key: rkey, va: rva, buf: sd.rback[guard : guard+fuzzRSize : guard+fuzzRSize], valid: true,
			access: verbs.AccessLocalWrite | verbs.AccessRemote},
		{key: lkey, va: lva, buf: sd.lback[guard : guard+fuzzLSize : guard+fuzzLSize], valid: true,
			access: verbs.AccessLocalWrite, remoteInv: true},
	}}
	sd.sgeLen = fuzzSGELen
	if conf&64 != 0 {
		sd.sgeLen = 7
	}
	sd.rq, sd.cq = newFakeRQ(8), &fakeCQ{}
	sd.r = New(&sd.cfg, Env{Mem: mem, RQ: sd.rq, CQ: sd.cq})
	sd.r.noPlaceAhead = whole
	sd.buf = make([]byte, sd.cfg.PMTU+64)
	sd.sum = fnv.New64a()
	return sd
}

// receive keeps two receive WQEs posted, hands the responder rec if it
// parses, flushes it if flush, and counts and hashes the packets it then
// sends (a READ train may be thousands).
func (sd *fuzzSide) receive(t *testing.T, rec []byte, flush bool) {
	for sd.rq.Len() < 2 {
		sd.posted++
		sd.rq.post(verbs.RecvWR{ID: sd.posted, SGList: fuzzWQE(sd.posted, sd.sgeLen)})
	}
	if p, err := packet.Parse(rec); err == nil {
		sd.r.Receive(t0, p)
	}
	if flush {
		sd.r.Flush()
	}
	for i := 0; ; i++ {
		require.Less(t, i, 1<<16)
		k := sd.r.NextPacket(t0, sd.buf)
		if k == 0 {
			break
		}
		sd.sent++
		sd.sum.Write([]byte{byte(k >> 8), byte(k)})
		sd.sum.Write(sd.buf[:k])
	}
}

// fuzzReceive is the body of the FuzzReceive targets: dereg is the index
// of the record after which both regions are deregistered, -1 for none,
// or if revoke the QP's remote access is taken away.
func fuzzReceive(t *testing.T, in []byte, dereg int, revoke bool) {
	{
		if len(in) == 0 {
			return
		}
		conf := in[0]
		in = in[1:]
		cfg := &Config{
			QPN: ourQPN, DestQPN: peerQPN, PMTU: 256 << (conf & 3), RQPSN: 100, MinRNRTimer: 3,
			MaxDestRdAtomic: 4, PKey: packet.DefaultPKey, Pseudo: respPseudo,
			Access:  verbs.AccessRemote,
			Credits: conf&4 != 0, SRQ: conf&8 != 0,
		}
		if conf&16 != 0 {
			cfg.MaxDestRdAtomic = 0
		}
		if conf&32 != 0 {
			cfg.Access = 0
		}
		sr := conf&128 != 0
		if sr {
			cfg.SelectiveRepeat, cfg.OOOLimit = true, 3*(cfg.PMTU+oooOverhead)
		}
		// Each MR sits inside a larger buffer whose guard bytes must never
		// change: the responder must not write outside the regions.
		rback := make([]byte, guard+fuzzRSize+guard)
		lback := make([]byte, guard+fuzzLSize+guard)
		for i := range rback {
			rback[i] = 0xA5
		}
		for i := range lback {
			lback[i] = 0x5A
		}
		mem := &fakeMem{mrs: []*fakeMR{
			{key: rkey, va: rva, buf: rback[guard : guard+fuzzRSize : guard+fuzzRSize], valid: true,
				access: verbs.AccessLocalWrite | verbs.AccessRemote},
			{key: lkey, va: lva, buf: lback[guard : guard+fuzzLSize : guard+fuzzLSize], valid: true,
				access: verbs.AccessLocalWrite, remoteInv: true},
		}}
		rq := newFakeRQ(8)
		sgeLen := uint32(fuzzSGELen)
		if conf&64 != 0 {
			sgeLen = 7
		}
		cq := &fakeCQ{}
		r := New(cfg, Env{Mem: mem, RQ: rq, CQ: cq})
		buf := make([]byte, cfg.PMTU+64)
		var rsnap, lsnap []byte // the regions as they were deregistered
		posted := uint64(0)     // receive WQEs posted, IDs 1 to posted
		for idx := 0; len(in) >= 3; idx++ {
			mode, n := in[0], int(binary.BigEndian.Uint16(in[1:]))
			in = in[3:]
			n = min(n, len(in))
			rec := append([]byte(nil), in[:n]...)
			in = in[n:]
			for rq.Len() < 2 {
				posted++
				rq.post(verbs.RecvWR{ID: posted, SGList: fuzzWQE(posted, sgeLen)})
			}
			if mode&1 != 0 && len(rec) >= packet.BTHSize {
				packet.BTH(rec).SetPSN(r.EPSN().Add(int(mode>>2) - 16))
			}
			if p, err := packet.Parse(rec); err == nil {
				r.Receive(t0, p)
			}
			if mode&2 != 0 {
				r.Flush()
			}
			if idx == dereg {
				// After the record is received and before its responses
				// are taken: a READ train it queued faults (readFault),
				// with the completions held behind it.
				rsnap = append([]byte(nil), rback...)
				if revoke {
					r.SetAccess(0)
				} else {
					for _, mr := range mem.mrs {
						mr.valid = false
					}
					lsnap = append([]byte(nil), lback...)
				}
			}
			for i := 0; ; i++ {
				require.Less(t, i, 1<<16)
				k := r.NextPacket(t0, buf)
				if k == 0 {
					break
				}
				p, err := packet.Parse(buf[:k])
				require.NoError(t, err)
				require.NoError(t, cfg.Pseudo.CheckICRC(buf[:k]))
				require.True(t, p.Mask()&packet.MaskAck != 0, "responses only")
				if lsnap != nil {
					require.Zero(t, p.PayloadLen(), "READ response data after the region was deregistered")
				}
				require.LessOrEqual(t, p.PayloadLen(), cfg.PMTU)
				if a := p.AETH(); !sr && a != nil {
					require.NotEqual(t, packet.NAKSyndrome(packet.NAKSelectiveRepeat), a.Syndrome(),
						"no hole report without selective repeat")
				}
				if a := p.AETH(); a != nil && a.Syndrome().IsACK() {
					// An ACK (alone, or ending a READ or atomic response)
					// acknowledges a request already executed: its PSN is
					// before ePSN (IBA 9.7.5.1; rxe acknowledges pkt->psn
					// after execute moved resp.psn past it). Class J
					// excepted: a SEND with invalidate whose R_Key does
					// not invalidate is acknowledged at its own PSN, ePSN
					// and MSN not advanced, and the QP fails (rxe execute
					// returns RESPST_ERR_INVALIDATE_RKEY before it counts
					// the message; acknowledge still ACKs pkt->psn).
					classJ := r.FailState() == StateErrInvalidateRKey && p.PSN() == r.EPSN()
					require.True(t, p.PSN().Before(r.EPSN()) || classJ, "ACK of PSN %v with ePSN %v", p.PSN(), r.EPSN())
				}
			}
			require.False(t, r.Pending())
			require.Zero(t, r.q.reads, "READ response streams counted but none queued")
			if _, failed := r.Failed(); !failed {
				// Completions wait only behind a READ response stream
				// still queued; a READ that faulted leaves them to Flush.
				require.Zero(t, r.held.Len(), "completions held with nothing queued ahead")
			}
			// Receive WQEs complete once each, in the order they were
			// posted (a receive queue is FIFO; rxe completes the WQE it
			// took from the queue's head), and only WQEs taken from the
			// queue complete.
			require.LessOrEqual(t, uint64(len(cq.wcs)), posted-uint64(rq.Len()))
			for i, wc := range cq.wcs {
				require.Equal(t, uint64(i+1), wc.ID, "completion %d", i)
				require.Equal(t, uint32(ourQPN), wc.QPNum)
				if wc.Status == verbs.WCSuccess && wc.Opcode == verbs.WCRecv {
					require.LessOrEqual(t, wc.ByteLen, 2*sgeLen, "completion longer than its WQE")
				}
			}
			c := r.Counters()
			require.LessOrEqual(t, r.ooo.allocated(), max(cfg.OOOLimit, 0))
			require.LessOrEqual(t, c.OOOBytesPeak, uint64(max(cfg.OOOLimit, 0)))
			require.LessOrEqual(t, c.OOOPeak, uint64(3))
			require.Equal(t, uint64(r.ooo.n), c.OOOBuffered)
			if rsnap != nil {
				require.Equal(t, rsnap, rback, "remote region written after deregistration or SetAccess(0)")
			}
			if lsnap != nil {
				require.Equal(t, lsnap, lback, "local region written after deregistration")
			}
		}
		for i := range guard {
			require.Equal(t, byte(0xA5), rback[i])
			require.Equal(t, byte(0xA5), rback[guard+fuzzRSize+i])
			require.Equal(t, byte(0x5A), lback[i])
			require.Equal(t, byte(0x5A), lback[guard+fuzzLSize+i])
		}
		requireOutsideWQEs(t, lback[guard:guard+fuzzLSize], sgeLen)
	}
}

// fuzzSGELen is the length of each of the two SGEs of a receive WQE in
// the fuzz targets (7 with tiny buffers).
const fuzzSGELen = 1000

// fuzzWQE returns the SGEs of receive WQE id in the fuzz targets: two of
// sgeLen bytes (at most 1024) in the local region, 2048 bytes apart, at
// its start for odd IDs and 1024 bytes in for even ones, so that two
// WQEs in a row have buffers apart (placeNext places ahead into the
// next WQE only then).
func fuzzWQE(id uint64, sgeLen uint32) []verbs.SGE {
	at := uint64(lva)
	if id%2 == 0 {
		at += 1024
	}
	return []verbs.SGE{{Addr: at, Length: sgeLen, LKey: lkey}, {Addr: at + 2048, Length: sgeLen, LKey: lkey}}
}

// requireOutsideWQEs requires every byte of the local region local that
// no receive WQE's SGE names (fuzzWQE) to be as it was filled, 0x5A: a
// SEND, executed or placed ahead, writes only into a WQE's SGEs.
func requireOutsideWQEs(t *testing.T, local []byte, sgeLen uint32) {
	t.Helper()
	for i, b := range local {
		if off := uint32(i % 1024); off >= sgeLen && b != 0x5A {
			require.Failf(t, "local region written outside the receive WQEs", "offset %d", i)
		}
	}
}

// heldSeed is the index in fuzzSeeds of the seed whose SEND's completion
// is held behind a READ train (hold).
const heldSeed = 11

// fuzzSeeds returns valid request sequences for the corpus.
func fuzzSeeds(tb testing.TB) [][]byte {
	b := make([]byte, 8192)
	rec := func(mode byte, op packet.Opcode, payload []byte, mods ...reqMod) []byte {
		p := build(tb, b, op, 100, payload, mods...)
		out := []byte{mode, byte(p.Len() >> 8), byte(p.Len())}
		return append(out, p.Bytes()...)
	}
	const inSeq = 1 | 16<<2 // PSN = ePSN
	seq := func(conf byte, recs ...[]byte) []byte {
		out := []byte{conf}
		for _, r := range recs {
			out = append(out, r...)
		}
		return out
	}
	return [][]byte{
		seq(0, rec(inSeq, packet.RCSendOnly, pattern(100, 0), ackReq)),
		seq(0, rec(inSeq, packet.RCSendFirst, pattern(256, 0)), rec(inSeq, packet.RCSendMiddle, pattern(256, 0)),
			rec(inSeq, packet.RCSendLastWithImmediate, pattern(3, 0), imm(5), ackReq)),
		seq(1, rec(inSeq, packet.RCRDMAWriteFirst, pattern(512, 0), reth(rva+100, rkey, 1000)),
			rec(inSeq, packet.RCRDMAWriteLastWithImm, pattern(488, 0), imm(1))),
		seq(0, rec(inSeq, packet.RCRDMAWriteOnly, pattern(8, 0), reth(rva+fuzzRSize-8, rkey, 8), ackReq)),
		seq(2, rec(inSeq, packet.RCRDMAReadRequest, nil, reth(rva, rkey, 5000)),
			rec(1|14<<2, packet.RCRDMAReadRequest, nil, reth(rva+1024, rkey, 3976))),
		seq(0, rec(inSeq, packet.RCFetchAdd, nil, atomicETH(rva+fuzzRSize-8, rkey, 1, 0)),
			rec(1|15<<2, packet.RCCompareSwap, nil, atomicETH(rva, rkey, 1, 0))),
		seq(0, rec(inSeq, packet.RCAtomicWrite, pattern(8, 0), reth(rva+16, rkey, 8)),
			rec(inSeq, packet.RCFlush, nil, feth(1), reth(rva, rkey, 64))),
		seq(0, rec(inSeq, packet.RCSendOnlyWithInvalidate, pattern(9, 0), ieth(lkey), ackReq),
			rec(1|20<<2, packet.RCSendOnly, nil), rec(2|inSeq, packet.RCSendOnly, nil)),
		seq(64, rec(inSeq, packet.RCSendOnly, pattern(200, 0), ackReq)),
		// Selective repeat: PSNs ePSN+2, ePSN+1, then ePSN fills the hole.
		seq(128, rec(1|18<<2, packet.RCRDMAWriteOnly, pattern(8, 0), reth(rva+8, rkey, 8)),
			rec(1|17<<2, packet.RCSendOnly, pattern(20, 0), ackReq),
			rec(inSeq, packet.RCFetchAdd, nil, atomicETH(rva, rkey, 1, 0))),
		seq(128|1, rec(1|19<<2, packet.RCRDMAReadRequest, nil, reth(rva, rkey, 600)),
			rec(1|17<<2, packet.RCRDMAWriteFirst, pattern(512, 0), reth(rva+100, rkey, 1000)),
			rec(1|18<<2, packet.RCRDMAWriteLast, pattern(488, 0), ackReq),
			rec(inSeq, packet.RCCompareSwap, nil, atomicETH(rva+8, rkey, 1, 0)),
			rec(1|12<<2, packet.RCRDMAReadRequest, nil, reth(rva, rkey, 100))),
		// heldSeed: selective repeat, a READ at ePSN+1 and a SEND at ePSN+2 run
		// when a WRITE fills ePSN, the SEND's completion held behind the
		// READ's train (hold).
		seq(128, rec(1|17<<2, packet.RCRDMAReadRequest, nil, reth(rva, rkey, 100)),
			rec(1|18<<2, packet.RCSendOnly, pattern(20, 0), ackReq),
			rec(inSeq, packet.RCRDMAWriteOnly, pattern(8, 0), reth(rva+8, rkey, 8))),
		// Selective repeat, placed ahead (placeAhead): a WRITE and a SEND
		// in progress, their later packets after a hole at ePSN.
		seq(128, rec(inSeq, packet.RCRDMAWriteFirst, pattern(256, 0), reth(rva+100, rkey, 1000)),
			rec(1|18<<2, packet.RCRDMAWriteMiddle, pattern(256, 0)),
			rec(1|19<<2, packet.RCRDMAWriteLast, pattern(232, 0), ackReq),
			rec(inSeq, packet.RCRDMAWriteMiddle, pattern(256, 0))),
		seq(128, rec(inSeq, packet.RCSendFirst, pattern(256, 0)),
			rec(1|17<<2, packet.RCSendMiddle, pattern(256, 0)),
			rec(1|18<<2, packet.RCSendLast, pattern(100, 0), ackReq),
			rec(inSeq, packet.RCSendMiddle, pattern(256, 0))),
		// Selective repeat, a SEND after the SEND in progress placed ahead
		// (placeNext): the first SEND's FIRST, a hole, its LAST, then the
		// next SEND's FIRST and LAST, the hole filled last.
		seq(128, rec(inSeq, packet.RCSendFirst, pattern(256, 0)),
			rec(1|17<<2, packet.RCSendLast, pattern(100, 0), ackReq),
			rec(1|18<<2, packet.RCSendFirst, pattern(256, 1)),
			rec(1|19<<2, packet.RCSendLastWithImmediate, pattern(40, 3), imm(9), ackReq),
			rec(inSeq, packet.RCSendMiddle, pattern(256, 4))),
		// The same with the next SEND's MIDDLE lost too (the buffer is
		// full when it comes): its LAST is placed, and executes after the
		// MIDDLE is sent again.
		seq(128|1, rec(inSeq, packet.RCSendFirst, pattern(512, 0)),
			rec(1|17<<2, packet.RCSendLast, pattern(100, 0), ackReq),
			rec(1|18<<2, packet.RCSendFirst, pattern(512, 1)),
			rec(1|20<<2, packet.RCSendLast, pattern(12, 3), ackReq),
			rec(1|19<<2, packet.RCSendMiddle, pattern(512, 2)),
			rec(inSeq, packet.RCSendMiddle, pattern(512, 4)),
			rec(inSeq, packet.RCSendMiddle, pattern(512, 2))),
		// The same with the hole one PSN long, so that the WRITE's MIDDLE
		// and LAST fit the bytes its FIRST left (placed ahead).
		seq(128, rec(inSeq, packet.RCRDMAWriteFirst, pattern(256, 0), reth(rva+100, rkey, 1000)),
			rec(1|17<<2, packet.RCRDMAWriteMiddle, pattern(256, 0)),
			rec(1|18<<2, packet.RCRDMAWriteLast, pattern(232, 0), ackReq),
			rec(inSeq, packet.RCRDMAWriteMiddle, pattern(256, 0))),
	}
}
