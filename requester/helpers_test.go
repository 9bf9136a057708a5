package requester

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/retry"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

const (
	testQPN  = 0x11
	peerQPN  = 0x22
	testPKey = 0xFFFF
)

var (
	t0     = time.Unix(1_700_000_000, 0)
	pseudo = packet.PseudoHeader{
		Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("192.0.2.2"),
		SrcPort: 0xC001, DstPort: packet.UDPPort, IPFlags: packet.IPv4FlagDF,
	}
	// respPseudo is the pseudo-header of the responses (the other way).
	respPseudo = packet.PseudoHeader{
		Src: netip.MustParseAddr("192.0.2.2"), Dst: netip.MustParseAddr("192.0.2.1"),
		SrcPort: 0xC002, DstPort: packet.UDPPort, IPFlags: packet.IPv4FlagDF,
	}
)

// region is a memory region of the fake memory: buf is registered at base.
type region struct {
	base   uint64
	buf    []byte
	access verbs.AccessFlags
}

// fakeMem maps keys to regions; it serves both our L_Keys and the fake
// responder's R_Keys.
type fakeMem map[uint32]*region

func (m fakeMem) Local(lkey uint32, addr uint64, length uint32, need verbs.AccessFlags) ([]byte, bool) {
	rg := m[lkey]
	if rg == nil || need&^rg.access != 0 || addr < rg.base {
		return nil, false
	}
	off := addr - rg.base
	if off > uint64(len(rg.buf)) || uint64(length) > uint64(len(rg.buf))-off {
		return nil, false
	}
	return rg.buf[off : off+uint64(length) : off+uint64(length)], true
}

// add registers a region of n bytes filled with a pattern derived from
// seed, and returns it.
func (m fakeMem) add(key uint32, base uint64, n int, access verbs.AccessFlags, seed byte) *region {
	rg := &region{base: base, buf: make([]byte, n), access: access}
	for i := range rg.buf {
		rg.buf[i] = byte(i*7+i>>8) ^ seed
	}
	m[key] = rg
	return rg
}

// fakeCQ records completions.
type fakeCQ struct {
	wcs  []verbs.WC
	full bool
}

func (c *fakeCQ) Complete(wc *verbs.WC) bool {
	if c.full {
		return false
	}
	c.wcs = append(c.wcs, *wc)
	return true
}

func (c *fakeCQ) ids() []uint64 {
	ids := make([]uint64, len(c.wcs))
	for i := range c.wcs {
		ids[i] = c.wcs[i].ID
	}
	return ids
}

func baseConfig(pmtu int, sqpsn packet.PSN) *Config {
	return &Config{
		QPN: testQPN, DestQPN: peerQPN, PMTU: pmtu, SQPSN: sqpsn,
		Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 16, PKey: testPKey,
		Pseudo: pseudo, MaxWR: 64, MaxSGE: 4, MaxInline: 64,
	}
}

// harness bundles a requester with its memory and CQ.
type harness struct {
	t   testing.TB
	r   *Requester
	mem fakeMem
	cq  *fakeCQ
	buf []byte
	now time.Time

	posted int // work requests post accepted

	tm *trackMem // the fuzz targets' write tracking (fuzzSetup)
}

func newHarness(t testing.TB, cfg *Config) *harness {
	h := &harness{t: t, mem: fakeMem{}, cq: &fakeCQ{}, now: t0}
	h.r = New(cfg, h.mem, h.cq)
	h.buf = make([]byte, cfg.PMTU+maxHeaders)
	return h
}

func (h *harness) post(wr *verbs.SendWR) {
	h.t.Helper()
	require.NoError(h.t, h.r.Post(wr))
	h.posted++
}

// next builds one packet, checks its structure and ICRC, and returns a
// private copy, or nil.
func (h *harness) next() []byte {
	h.t.Helper()
	n := h.r.NextPacket(h.now, h.buf)
	if n == 0 {
		return nil
	}
	b := append([]byte(nil), h.buf[:n]...)
	p, err := packet.Parse(b)
	require.NoError(h.t, err)
	require.NoError(h.t, pseudo.CheckICRC(b))
	require.Equal(h.t, uint32(peerQPN), p.DestQP())
	require.Equal(h.t, uint16(testPKey), p.BTH().PKey())
	for _, x := range b[n-packet.ICRCSize-p.PadCnt() : n-packet.ICRCSize] {
		require.Zero(h.t, x, "pad byte")
	}
	return b
}

// drain returns every packet NextPacket gives now.
func (h *harness) drain() [][]byte {
	h.t.Helper()
	var out [][]byte
	for h.r.Pending() {
		b := h.next()
		require.NotNil(h.t, b, "Pending but no packet")
		out = append(out, b)
	}
	require.Nil(h.t, h.next(), "packet while not Pending")
	return out
}

// withResponder returns a requester harness for cfg with n bytes of local
// memory at baseA (L_Key lkeyA), and a fake responder at cfg's first PSN
// with n bytes at rbase (R_Key rkey, granting access, filled with seed).
func withResponder(t *testing.T, cfg *Config, n int, access verbs.AccessFlags, seed byte) (*harness, *fakeResponder, *region) {
	t.Helper()
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, n, verbs.AccessLocalWrite, 0)
	f := newResponder(t, cfg.PMTU, cfg.SQPSN)
	return h, f, f.mem.add(rkey, rbase, n, access, seed)
}

// undouble checks that a go-back-N retry that a sequence NAK started sent
// its first packet twice in a row, byte for byte (doubleResend), and
// returns the packets without the second copy.
func undouble(t *testing.T, out [][]byte) [][]byte {
	t.Helper()
	require.GreaterOrEqual(t, len(out), 2, "the retry's first packet goes twice")
	require.Equal(t, out[0], out[1], "the retry's first packet goes twice")
	return append(out[:1:1], out[2:]...)
}

func (h *harness) recv(b []byte) {
	h.t.Helper()
	p, err := packet.Parse(b)
	require.NoError(h.t, err)
	h.r.Receive(h.now, p)
}

// requireFailedWith checks that the requester failed with want and that
// its one completion carries want: a failure of the only WQE posted.
func (h *harness) requireFailedWith(want verbs.WCStatus) {
	h.t.Helper()
	st, failed := h.r.Failed()
	require.True(h.t, failed)
	require.Equal(h.t, want, st)
	require.Len(h.t, h.cq.wcs, 1)
	require.Equal(h.t, want, h.cq.wcs[0].Status)
}

func parse(t testing.TB, b []byte) packet.Packet {
	t.Helper()
	p, err := packet.Parse(b)
	require.NoError(t, err)
	return p
}

// resp builds a response packet to our QP.
func resp(op packet.Opcode, psn packet.PSN, syn packet.Syndrome, msn uint32, payload []byte) []byte {
	return respOrig(op, psn, syn, msn, payload, 0)
}

func respOrig(op packet.Opcode, psn packet.PSN, syn packet.Syndrome, msn uint32, payload []byte, orig uint64) []byte {
	h := packet.Headers{
		BTH:       packet.BTHFields{Opcode: op, PKey: testPKey, DestQP: testQPN, PSN: psn & packet.PSNMask},
		AETH:      packet.AETHFields{Syndrome: syn, MSN: msn},
		AtomicAck: orig,
	}
	b := make([]byte, packet.PacketLen(op, len(payload)))
	n, err := packet.Build(b, &h, payload, &respPseudo)
	if err != nil {
		panic(err)
	}
	return b[:n]
}

func ack(psn packet.PSN) []byte {
	return resp(packet.RCAcknowledge, psn, packet.SyndromeACKUnlimited, 0, nil)
}

func nak(psn packet.PSN, c packet.NAKCode) []byte {
	return resp(packet.RCAcknowledge, psn, packet.NAKSyndrome(c), 0, nil)
}

func rnr(psn packet.PSN, code uint8) []byte {
	return resp(packet.RCAcknowledge, psn, packet.RNRSyndrome(code), 0, nil)
}

// readResp builds the response train of a read of data at request PSN psn,
// starting with packet index from (rxe style: MIDDLE/LAST after a restart)
// or, with restartFirst, as a fresh FIRST/ONLY from that index (rdmavt).
func readResp(pmtu int, psn packet.PSN, data []byte, from int, restartFirst bool) [][]byte {
	n := max(1, (len(data)+pmtu-1)/pmtu)
	var out [][]byte
	for i := from; i < n; i++ {
		chunk := data[i*pmtu : min(len(data), (i+1)*pmtu)]
		first := i == 0 || restartFirst && i == from
		last := i == n-1
		var op packet.Opcode
		switch {
		case first && last:
			op = packet.RCRDMAReadResponseOnly
		case first:
			op = packet.RCRDMAReadResponseFirst
		case last:
			op = packet.RCRDMAReadResponseLast
		default:
			op = packet.RCRDMAReadResponseMiddle
		}
		out = append(out, resp(op, psn.Add(i), packet.SyndromeACKUnlimited, 1, chunk))
	}
	return out
}

// fakeResponder is a small RC responder model for tests: in-order
// execution, one sequence NAK per gap, duplicate re-ACKs, duplicate read
// replay, atomic replay, RNR when out of receive credits. Its memory is
// addressed by R_Key.
type fakeResponder struct {
	t       testing.TB
	pmtu    int
	epsn    packet.PSN
	msn     uint32
	mem     fakeMem
	rq      int // receive WQEs; -1 = unlimited
	rnrCode uint8
	rdmavt  bool // answer duplicate reads FIRST/ONLY from the retry PSN
	ackAll  bool // ACK every packet, not only AckReq ones
	nakSent bool
	msgs    [][]byte // completed SEND messages
	cur     []byte   // SEND in progress
	wva     uint64   // WRITE in progress
	wkey    uint32
	reads   []readRes
	atomics map[packet.PSN]uint64
	out     [][]byte // responses to deliver
	sr      srResponder
}

type readRes struct {
	first, last packet.PSN
	va          uint64
	rkey        uint32
	length      uint32
}

func newResponder(t testing.TB, pmtu int, epsn packet.PSN) *fakeResponder {
	return &fakeResponder{t: t, pmtu: pmtu, epsn: epsn, mem: fakeMem{}, rq: -1,
		atomics: map[packet.PSN]uint64{}}
}

func (f *fakeResponder) send(b []byte) { f.out = append(f.out, b) }

func (f *fakeResponder) take() [][]byte {
	o := f.out
	f.out = nil
	f.sr.urgent = 0
	return o
}

// handle processes one request packet; under selective repeat (sr.on)
// future PSNs are buffered and executed in order (srFuture, srDrain).
func (f *fakeResponder) handle(b []byte) {
	if f.sr.on && f.srFuture(b) {
		return
	}
	before := f.epsn
	f.handleInOrder(b)
	if f.sr.on && f.epsn != before {
		f.srDrain()
	}
}

// handleInOrder processes one request packet as an IBTA responder does.
func (f *fakeResponder) handleInOrder(b []byte) {
	p, err := packet.Parse(b)
	require.NoError(f.t, err)
	require.NoError(f.t, pseudo.CheckICRC(b))
	psn := p.PSN()
	op := p.Opcode()
	switch d := psn.Diff(f.epsn); {
	case d > 0:
		if !f.nakSent {
			f.nakSent = true
			f.send(resp(packet.RCAcknowledge, f.epsn, packet.NAKSyndrome(packet.NAKPSNSeqError), f.msn, nil))
		}
		return
	case d < 0:
		f.duplicate(p)
		return
	}
	f.nakSent = false
	m := p.Mask()
	switch {
	case m&packet.MaskSend != 0:
		if m&packet.MaskStart != 0 {
			if f.rq == 0 {
				f.send(resp(packet.RCAcknowledge, psn, packet.RNRSyndrome(f.rnrCode), f.msn, nil))
				return
			}
			if f.rq > 0 {
				f.rq--
			}
			f.cur = f.cur[:0:0]
		}
		f.cur = append(f.cur, p.Payload()...)
		if m&packet.MaskEnd != 0 {
			f.msgs = append(f.msgs, f.cur)
			f.cur = nil
			f.msn++
		}
	case m&packet.MaskAtomicWrite != 0:
		reth := p.RETH()
		dst, ok := f.mem.Local(reth.RKey(), reth.VA(), 8, verbs.AccessRemoteWrite)
		require.True(f.t, ok, "atomic write target")
		copy(dst, p.Payload())
		f.msn++
		f.epsn = psn.Next()
		f.send(resp(packet.RCRDMAReadResponseOnly, psn, packet.SyndromeACKUnlimited, f.msn, nil))
		return
	case m&packet.MaskWrite != 0:
		if m&packet.MaskRWR != 0 && f.rq == 0 {
			f.send(resp(packet.RCAcknowledge, psn, packet.RNRSyndrome(f.rnrCode), f.msn, nil))
			return
		}
		if reth := p.RETH(); reth != nil {
			f.wva, f.wkey = reth.VA(), reth.RKey()
		}
		if pl := p.Payload(); len(pl) > 0 {
			dst, ok := f.mem.Local(f.wkey, f.wva, uint32(len(pl)), verbs.AccessRemoteWrite)
			require.True(f.t, ok, "write target")
			copy(dst, pl)
			f.wva += uint64(len(pl))
		}
		if m&packet.MaskEnd != 0 {
			if m&packet.MaskRWR != 0 && f.rq > 0 {
				f.rq--
			}
			f.msn++
		}
	case op == packet.RCRDMAReadRequest:
		reth := p.RETH()
		n := max(1, (int(reth.DMALen())+f.pmtu-1)/f.pmtu)
		rr := readRes{first: psn, last: psn.Add(n - 1), va: reth.VA(), rkey: reth.RKey(), length: reth.DMALen()}
		f.reads = append(f.reads, rr)
		f.msn++
		f.epsn = psn.Add(n)
		f.replyRead(rr, psn, reth.VA(), reth.DMALen(), true)
		return
	case m&packet.MaskAtomic != 0:
		a := p.AtomicETH()
		dst, ok := f.mem.Local(a.RKey(), a.VA(), 8, verbs.AccessRemoteAtomic)
		require.True(f.t, ok, "atomic target")
		orig := binary.NativeEndian.Uint64(dst)
		if op == packet.RCCompareSwap {
			if orig == a.Compare() {
				binary.NativeEndian.PutUint64(dst, a.SwapAdd())
			}
		} else {
			binary.NativeEndian.PutUint64(dst, orig+a.SwapAdd())
		}
		f.atomics[psn] = orig
		f.msn++
		f.epsn = psn.Next()
		f.send(respOrig(packet.RCAtomicAcknowledge, psn, packet.SyndromeACKUnlimited, f.msn, nil, orig))
		return
	}
	f.epsn = psn.Next()
	if (p.AckReq() || f.ackAll) && !f.sr.draining {
		f.send(resp(packet.RCAcknowledge, psn, packet.SyndromeACKUnlimited, f.msn, nil))
	}
}

// replyRead sends the responses of a read resource from PSN psn for the
// given VA and length.
func (f *fakeResponder) replyRead(rr readRes, psn packet.PSN, va uint64, length uint32, fresh bool) {
	data, ok := f.mem.Local(rr.rkey, va, length, verbs.AccessRemoteRead)
	if length == 0 {
		data, ok = nil, true
	}
	require.True(f.t, ok, "read source")
	n := max(1, (len(data)+f.pmtu-1)/f.pmtu)
	for i := range n {
		chunk := data[i*f.pmtu : min(len(data), (i+1)*f.pmtu)]
		p := psn.Add(i)
		first := i == 0 && (fresh || f.rdmavt || p == rr.first)
		last := p == rr.last
		var op packet.Opcode
		switch {
		case first && last:
			op = packet.RCRDMAReadResponseOnly
		case first:
			op = packet.RCRDMAReadResponseFirst
		case last:
			op = packet.RCRDMAReadResponseLast
		default:
			op = packet.RCRDMAReadResponseMiddle
		}
		f.send(resp(op, p, packet.SyndromeACKUnlimited, f.msn, chunk))
	}
}

func (f *fakeResponder) duplicate(p packet.Packet) {
	psn := p.PSN()
	switch {
	case p.Opcode() == packet.RCRDMAReadRequest:
		for _, rr := range f.reads {
			if psn.InRange(rr.first, int(rr.last.Diff(rr.first))+1) {
				reth := p.RETH()
				require.GreaterOrEqual(f.t, reth.VA(), rr.va, "retried READ VA")
				require.LessOrEqual(f.t, reth.VA()+uint64(reth.DMALen()), rr.va+uint64(rr.length), "retried READ range")
				if f.sr.on {
					// Selective repeat: an extra stream ahead of the
					// queued responses.
					queued := f.out
					f.out = nil
					f.replyRead(rr, psn, reth.VA(), reth.DMALen(), false)
					extra := f.out
					f.out = slices.Concat(queued[:f.sr.urgent], extra, queued[f.sr.urgent:])
					f.sr.urgent += len(extra)
					return
				}
				f.replyRead(rr, psn, reth.VA(), reth.DMALen(), false)
				return
			}
		}
	case p.Mask()&packet.MaskAtomic != 0:
		if orig, ok := f.atomics[psn]; ok {
			f.send(respOrig(packet.RCAtomicAcknowledge, psn, packet.SyndromeACKUnlimited, f.msn, nil, orig))
		}
	case p.Mask()&packet.MaskAtomicWrite != 0:
		f.send(resp(packet.RCRDMAReadResponseOnly, psn, packet.SyndromeACKUnlimited, f.msn, nil))
	default:
		f.send(resp(packet.RCAcknowledge, f.epsn.Add(-1), packet.SyndromeACKUnlimited, f.msn, nil))
	}
}

// pumpLink runs requester and responder against each other until nothing
// moves, delivering every packet; it returns the request packets sent.
func pumpLink(h *harness, f *fakeResponder) [][]byte {
	h.t.Helper()
	var sent [][]byte
	for i := 0; ; i++ {
		require.Less(h.t, i, 1<<20, "link does not settle")
		b := h.next()
		if b != nil {
			sent = append(sent, b)
			f.handle(b)
		}
		out := f.take()
		for _, o := range out {
			h.recv(o)
		}
		if b == nil && len(out) == 0 {
			if d := h.r.Deadline(); !d.IsZero() && h.r.Outstanding() > 0 && !h.r.Pending() {
				h.now = d
				h.r.OnTimeout(h.now)
				continue
			}
			return sent
		}
	}
}

var _ = retry.AckTimeout
