package responder

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// Test fixtures: one remote MR (RDMA target), one local MR (receive
// buffers), in a fake Memory that checks keys, rights and ranges the way
// the device does.
const (
	rkey    = 0x1234
	rva     = 0x10000
	rsize   = 1 << 17
	lkey    = 0x77
	lva     = 0x900000
	lsize   = 1 << 17
	guard   = 64
	peerQPN = 0x22
	ourQPN  = 0x11
)

var (
	ourAddr  = netip.MustParseAddr("10.0.0.2")
	peerAddr = netip.MustParseAddr("10.0.0.1")
	// respPseudo is the pseudo-header of the responder's packets;
	// reqPseudo that of the requests the tests build.
	respPseudo = packet.PseudoHeader{Src: ourAddr, Dst: peerAddr, SrcPort: 0xC001, DstPort: packet.UDPPort, IPFlags: packet.IPv4FlagDF}
	reqPseudo  = packet.PseudoHeader{Src: peerAddr, Dst: ourAddr, SrcPort: 0xC002, DstPort: packet.UDPPort, IPFlags: packet.IPv4FlagDF}
	t0         = time.Unix(1_700_000_000, 0)
)

type fakeMR struct {
	key       uint32
	va        uint64
	buf       []byte
	access    verbs.AccessFlags
	valid     bool
	remoteInv bool // may be invalidated by SEND_WITH_INV
}

// fakeMem resolves keys like the device: key, validity, rights, range.
type fakeMem struct {
	mrs         []*fakeMR
	invalidated []uint32
}

func (m *fakeMem) lookup(key uint32, va uint64, length uint32, need verbs.AccessFlags) ([]byte, bool) {
	for _, mr := range m.mrs {
		if mr.key != key || !mr.valid {
			continue
		}
		if mr.access&need != need {
			return nil, false
		}
		if va < mr.va {
			return nil, false
		}
		off, size := va-mr.va, uint64(len(mr.buf))
		if off > size || uint64(length) > size-off {
			return nil, false
		}
		end := off + uint64(length)
		return mr.buf[off:end:end], true
	}
	return nil, false
}

func (m *fakeMem) Remote(rkey uint32, va uint64, length uint32, need verbs.AccessFlags) ([]byte, bool) {
	return m.lookup(rkey, va, length, need)
}

func (m *fakeMem) RemoteRegion(rkey uint32, need verbs.AccessFlags) bool {
	for _, mr := range m.mrs {
		if mr.key == rkey && mr.valid {
			return mr.access&need == need
		}
	}
	return false
}

func (m *fakeMem) Local(lkey uint32, addr uint64, length uint32, need verbs.AccessFlags) ([]byte, bool) {
	return m.lookup(lkey, addr, length, need)
}

func (m *fakeMem) Invalidate(rkey uint32) bool {
	for _, mr := range m.mrs {
		if mr.key == rkey && mr.valid && mr.remoteInv {
			mr.valid = false
			m.invalidated = append(m.invalidated, rkey)
			return true
		}
	}
	return false
}

// fakeRQ is a ring of receive WRs that does not allocate once built.
// peeked says the head WR was returned by Peek and not yet popped.
type fakeRQ struct {
	wrs     []verbs.RecvWR
	head, n int
	peeked  bool
}

func newFakeRQ(size int) *fakeRQ { return &fakeRQ{wrs: make([]verbs.RecvWR, size)} }

func (q *fakeRQ) post(wr verbs.RecvWR) {
	if q.n == len(q.wrs) {
		panic("fakeRQ full")
	}
	q.wrs[(q.head+q.n)%len(q.wrs)] = wr
	q.n++
}

func (q *fakeRQ) Peek() (*verbs.RecvWR, bool) {
	if q.n == 0 {
		return nil, false
	}
	q.peeked = true
	return &q.wrs[q.head], true
}

func (q *fakeRQ) Pop() {
	q.peeked = false
	q.wrs[q.head] = verbs.RecvWR{}
	q.head = (q.head + 1) % len(q.wrs)
	q.n--
}

func (q *fakeRQ) Len() int { return q.n }

// fakeCQ records completions; limit > 0 makes it overflow after limit
// entries, limit < 0 makes it always full.
type fakeCQ struct {
	wcs   []verbs.WC
	limit int
}

func (c *fakeCQ) Complete(wc *verbs.WC) bool {
	if c.limit < 0 || c.limit > 0 && len(c.wcs) >= c.limit {
		return false
	}
	c.wcs = append(c.wcs, *wc)
	return true
}

// harness wires a Responder to fakes, in the manner of gVisor's
// tcp/testing/context: build request packets, feed them, pull and check
// what comes out.
type harness struct {
	t      testing.TB
	cfg    Config
	mem    *fakeMem
	remote *fakeMR
	local  *fakeMR
	rq     *fakeRQ
	cq     *fakeCQ
	r      *Responder
	states []State
	tx     []byte
	rxbuf  []byte
}

type cfgMod func(*Config)

func withPMTU(n int) cfgMod       { return func(c *Config) { c.PMTU = n } }
func withPSN(p packet.PSN) cfgMod { return func(c *Config) { c.RQPSN = p } }

func newHarness(t testing.TB, mods ...cfgMod) *harness {
	h := &harness{
		t: t,
		cfg: Config{
			QPN: ourQPN, DestQPN: peerQPN, PMTU: 1024, RQPSN: 100, MinRNRTimer: 12,
			MaxDestRdAtomic: 4, Access: verbs.AccessRemoteRead | verbs.AccessRemoteWrite | verbs.AccessRemoteAtomic,
			PKey: packet.DefaultPKey, Pseudo: respPseudo,
		},
		rq:    newFakeRQ(256),
		cq:    &fakeCQ{wcs: make([]verbs.WC, 0, 1024)},
		tx:    make([]byte, 8192),
		rxbuf: make([]byte, 4096+64),
	}
	for _, m := range mods {
		m(&h.cfg)
	}
	h.remote = &fakeMR{key: rkey, va: rva, buf: make([]byte, rsize), valid: true,
		access: verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite | verbs.AccessRemoteAtomic |
			verbs.AccessFlushGlobal}
	h.local = &fakeMR{key: lkey, va: lva, buf: make([]byte, lsize), valid: true, access: verbs.AccessLocalWrite}
	h.mem = &fakeMem{mrs: []*fakeMR{h.remote, h.local}}
	h.r = New(&h.cfg, Env{Mem: h.mem, RQ: h.rq, CQ: h.cq, Trace: func(s State) { h.states = append(h.states, s) }})
	return h
}

// reqMod modifies the headers of a request being built.
type reqMod func(*packet.Headers)

func ackReq(h *packet.Headers) { h.BTH.AckReq = true }
func se(h *packet.Headers)     { h.BTH.SE = true }

func reth(va uint64, key, length uint32) reqMod {
	return func(h *packet.Headers) { h.RETH = packet.RETHFields{VA: va, RKey: key, DMALen: length} }
}

func imm(v uint32) reqMod  { return func(h *packet.Headers) { h.Imm = v } }
func ieth(k uint32) reqMod { return func(h *packet.Headers) { h.IETH = k } }
func feth(v uint32) reqMod { return func(h *packet.Headers) { h.FETH = v } }

func atomicETH(va uint64, key uint32, swapAdd, cmp uint64) reqMod {
	return func(h *packet.Headers) {
		h.AtomicETH = packet.AtomicETHFields{VA: va, RKey: key, SwapAdd: swapAdd, Compare: cmp}
	}
}

// build encodes a request into b.
func build(t testing.TB, b []byte, op packet.Opcode, psn packet.PSN, payload []byte, mods ...reqMod) packet.Packet {
	var hdr packet.Headers
	hdr.BTH = packet.BTHFields{Opcode: op, PKey: packet.DefaultPKey, DestQP: ourQPN, PSN: psn}
	for _, m := range mods {
		m(&hdr)
	}
	n, err := packet.Build(b, &hdr, payload, &reqPseudo)
	require.NoError(t, err)
	p, err := packet.Parse(b[:n])
	require.NoError(t, err)
	return p
}

// rx builds a request and feeds it to the responder.
func (h *harness) rx(op packet.Opcode, psn packet.PSN, payload []byte, mods ...reqMod) {
	h.t.Helper()
	h.r.Receive(t0, build(h.t, h.tx, op, psn, payload, mods...))
}

// msgOps are the opcodes of a message kind.
type msgOps struct{ only, first, middle, last packet.Opcode }

var (
	sendOps     = msgOps{packet.RCSendOnly, packet.RCSendFirst, packet.RCSendMiddle, packet.RCSendLast}
	sendImmOps  = msgOps{packet.RCSendOnlyWithImmediate, packet.RCSendFirst, packet.RCSendMiddle, packet.RCSendLastWithImmediate}
	sendInvOps  = msgOps{packet.RCSendOnlyWithInvalidate, packet.RCSendFirst, packet.RCSendMiddle, packet.RCSendLastWithInvalidate}
	writeOps    = msgOps{packet.RCRDMAWriteOnly, packet.RCRDMAWriteFirst, packet.RCRDMAWriteMiddle, packet.RCRDMAWriteLast}
	writeImmOps = msgOps{packet.RCRDMAWriteOnlyWithImm, packet.RCRDMAWriteFirst, packet.RCRDMAWriteMiddle, packet.RCRDMAWriteLastWithImm}
)

// message sends data as one message segmented by the PMTU, like a
// requester: AckReq on the last packet; mods apply to every packet (the
// encoder only writes the headers an opcode carries). It returns the next
// PSN.
func (h *harness) message(ops msgOps, psn packet.PSN, data []byte, mods ...reqMod) packet.PSN {
	h.t.Helper()
	mtu := h.cfg.PMTU
	if len(data) <= mtu {
		h.rx(ops.only, psn, data, append(mods, ackReq)...)
		return psn.Next()
	}
	for off := 0; off < len(data); off += mtu {
		end := min(off+mtu, len(data))
		op, ms := ops.middle, mods
		switch {
		case off == 0:
			op = ops.first
		case end == len(data):
			op, ms = ops.last, append(mods, ackReq)
		}
		h.rx(op, psn, data[off:end], ms...)
		psn = psn.Next()
	}
	return psn
}

// drain pulls every pending packet; each must parse and carry a valid ICRC.
func (h *harness) drain() []packet.Packet {
	h.t.Helper()
	var out []packet.Packet
	for i := 0; ; i++ {
		require.Less(h.t, i, 1<<16, "NextPacket never ends")
		n := h.r.NextPacket(t0, h.rxbuf)
		if n == 0 {
			require.False(h.t, h.r.Pending())
			return out
		}
		b := append([]byte(nil), h.rxbuf[:n]...)
		p, err := packet.Parse(b)
		require.NoError(h.t, err)
		require.NoError(h.t, h.cfg.Pseudo.CheckICRC(b))
		require.Equal(h.t, uint32(peerQPN), p.DestQP())
		require.Equal(h.t, h.cfg.PKey, p.BTH().PKey())
		out = append(out, p)
	}
}

// postRecv posts a receive WR with the given SGE lengths, laid out in the
// local MR 4 KiB apart from offset 8 (so that scatter crosses SGEs).
func (h *harness) postRecv(id uint64, lens ...uint32) []verbs.SGE {
	sges := make([]verbs.SGE, len(lens))
	addr := uint64(lva + 8)
	for i, l := range lens {
		sges[i] = verbs.SGE{Addr: addr, Length: l, LKey: lkey}
		addr += (uint64(l) + 4096) &^ 4095
	}
	h.rq.post(verbs.RecvWR{ID: id, SGList: sges})
	return sges
}

// gather reads back what landed in the SGEs (n bytes).
func (h *harness) gather(sges []verbs.SGE, n int) []byte {
	out := make([]byte, 0, n)
	for _, s := range sges {
		if len(out) == n {
			break
		}
		k := min(int(s.Length), n-len(out))
		off := s.Addr - lva
		out = append(out, h.local.buf[off:off+uint64(k)]...)
	}
	return out
}

// remoteBytes returns the remote MR bytes at va.
func (h *harness) remoteBytes(va uint64, n int) []byte {
	return h.remote.buf[va-rva : va-rva+uint64(n)]
}

func (h *harness) seen(s State) bool {
	for _, x := range h.states {
		if x == s {
			return true
		}
	}
	return false
}

// pattern returns n bytes of a recognisable pattern.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

// check is a checker in the style of gVisor's checker package.
type check func(testing.TB, packet.Packet)

func opcode(op packet.Opcode) check {
	return func(t testing.TB, p packet.Packet) {
		t.Helper()
		require.Equal(t, op, p.Opcode())
	}
}

func psnIs(want packet.PSN) check {
	return func(t testing.TB, p packet.Packet) {
		t.Helper()
		require.Equal(t, want, p.PSN(), "PSN")
	}
}

func aeth(syn packet.Syndrome, msn uint32) check {
	return func(t testing.TB, p packet.Packet) {
		t.Helper()
		a := p.AETH()
		require.NotNil(t, a, "AETH")
		require.Equal(t, syn, a.Syndrome(), "syndrome %v", a.Syndrome())
		require.Equal(t, msn, a.MSN(), "MSN")
	}
}

func syndrome(syn packet.Syndrome) check {
	return func(t testing.TB, p packet.Packet) {
		t.Helper()
		require.NotNil(t, p.AETH(), "AETH")
		require.Equal(t, syn, p.AETH().Syndrome(), "syndrome %v", p.AETH().Syndrome())
	}
}

func noAETH(t testing.TB, p packet.Packet) {
	t.Helper()
	require.Nil(t, p.AETH())
}

func payloadIs(want []byte) check {
	return func(t testing.TB, p packet.Packet) {
		t.Helper()
		require.Equal(t, len(want), p.PayloadLen(), "payload length")
		if len(want) > 0 {
			require.Equal(t, want, p.Payload())
		}
	}
}

func atomicOrig(v uint64) check {
	return func(t testing.TB, p packet.Packet) {
		t.Helper()
		require.NotNil(t, p.AtomicAckETH())
		require.Equal(t, v, p.AtomicAckETH().Orig())
	}
}

func expect(t testing.TB, p packet.Packet, checks ...check) {
	t.Helper()
	for _, c := range checks {
		c(t, p)
	}
}

// expectACK checks a plain unlimited-credit ACK.
func expectACK(t testing.TB, p packet.Packet, psn packet.PSN, msn uint32) {
	t.Helper()
	expect(t, p, opcode(packet.RCAcknowledge), psnIs(psn), aeth(packet.SyndromeACKUnlimited, msn))
}
