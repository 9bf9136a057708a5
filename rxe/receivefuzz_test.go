package rxe

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
)

// fuzzGuard is the number of bytes on either side of each memory region
// of FuzzDeviceReceive that no packet may write.
const fuzzGuard = 64

// guarded returns a buffer of n bytes with fuzzGuard guard bytes on either
// side, all filled with fill, and the n bytes in the middle.
func guarded(n int, fill byte) (back, mid []byte) {
	back = bytes.Repeat([]byte{fill}, fuzzGuard+n+fuzzGuard)
	return back, back[fuzzGuard : fuzzGuard+n : fuzzGuard+n]
}

// accounted is the number of datagrams d has counted as received, each
// once: handed to a QP, dropped for a bad ICRC, malformed, for no QP, a
// CNP, or a MAD for QP1.
func accounted(d *Device) uint64 {
	c, g := d.Counters(), d.GSICounters()
	return c.RcvdPkts + c.BadICRC + c.Malformed + c.UnknownQP + c.CNPs + g.RcvdMADs + g.BadQKey + g.Malformed
}

// sentDatagrams is the number of datagrams d has sent: its QPs' packets
// and QP1's MADs.
func sentDatagrams(d *Device) uint64 { return d.Counters().SentPkts + d.GSICounters().SentMADs }

// FuzzDeviceReceive injects datagrams made of the fuzzer's bytes into a
// device over the in-memory pipe, as its peer's address: to its RC QP
// (connected to the peer's), its UD QP, QP1 or any QPN, with a good ICRC
// or as given. The device's receive path (rxe_rcv: parse, ICRC, P_Key,
// dispatch to a QP or to the CM on QP1) and the engines behind it must
// (with a listener for RDMA CM requests) never panic, and:
//   - every datagram either device receives is counted once, handed to a
//     QP or dropped with its reason (Counters, GSICounters): each device
//     counts what was injected and what the other sent, no more, no less;
//   - nothing is written outside the memory regions, nor into a region
//     that grants remote read access only and has no receive posted
//     into it;
//   - each receive work request completes at most once;
//   - both devices close, leaving no goroutine behind (fuzzLeakCheck).
//
// Input: records [sel][aux][len hi][len lo][len bytes]. sel bits 0-1: the
// destination QP (0 the RC QP, 1 the UD QP, 2 QP1, 3 the packet's own),
// bit 2: the PSN rewritten to the RC QP's expected PSN plus sel>>6 (a
// record after another with the same is a duplicate), bit 3: a RETH's or
// AtomicETH's address and key aimed at the remote region (bit 4: at the
// region the peer may only read) at offset aux-8 (before its start for aux
// below 8), bit 5: the ICRC left as given.
func FuzzDeviceReceive(f *testing.F) {
	rec := func(sel, aux byte, h *packet.Headers, payload []byte) []byte {
		b := make([]byte, 512+len(payload))
		// Any ICRC: the target seals the packets it sends.
		n, err := packet.Build(b, h, payload, &packet.PseudoHeader{Src: netip.IPv4Unspecified(), Dst: netip.IPv4Unspecified()})
		require.NoError(f, err)
		return append([]byte{sel, aux, byte(n >> 8), byte(n)}, b[:n]...)
	}
	bth := func(op packet.Opcode) packet.BTHFields {
		return packet.BTHFields{Opcode: op, PKey: packet.DefaultPKey, AckReq: true}
	}
	write := packet.Headers{BTH: bth(packet.RCRDMAWriteOnly), RETH: packet.RETHFields{DMALen: 16}}
	read := packet.Headers{BTH: bth(packet.RCRDMAReadRequest), RETH: packet.RETHFields{DMALen: 40}}
	fadd := packet.Headers{BTH: bth(packet.RCFetchAdd), AtomicETH: packet.AtomicETHFields{SwapAdd: 3}}
	send := packet.Headers{BTH: bth(packet.RCSendOnly)}
	ud := packet.Headers{BTH: bth(packet.UDSendOnly), DETH: packet.DETHFields{QKey: fuzzQKey, SrcQP: 9}}
	mad := make([]byte, packet.MADSize)
	packet.EncodeCM(mad, 5, &packet.REQ{LocalCommID: 1, ServiceID: packet.RDMACMServiceID(packet.RDMACMProtoTCP, 7471), LocalQPN: 0x44})
	// A REQ for the listener, with RDMA CM's IP header.
	listened := make([]byte, packet.MADSize)
	req := &packet.REQ{LocalCommID: 2, ServiceID: packet.RDMACMServiceID(packet.RDMACMProtoTCP, fuzzCMPort), LocalQPN: 0x45,
		StartingPSN: 9, PathMTU: 3, MaxCMRetries: 3, RemoteCMResponseTimeout: 20, LocalCMResponseTimeout: 20}
	(&packet.CMIPHeader{IPVersion: 4, SrcPort: 5000, Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2")}).Encode(req.PrivateData[:])
	packet.EncodeCM(listened, 6, req)
	gsi := packet.Headers{BTH: bth(packet.UDSendOnly), DETH: packet.DETHFields{QKey: packet.GSIQKey, SrcQP: 1}}
	f.Add(bytes.Join([][]byte{rec(4|8, 8, &write, bytes.Repeat([]byte{0xEE}, 16)), rec(4|8|1<<6, 8, &read, nil),
		rec(4|8|2<<6, 24, &fadd, nil), rec(4|3<<6, 0, &send, []byte("hello")), rec(4|3<<6, 0, &send, []byte("hello"))}, nil))
	f.Add(bytes.Join([][]byte{rec(4|8|16, 8, &write, bytes.Repeat([]byte{0xEE}, 16)), rec(4|8, 240, &write, bytes.Repeat([]byte{0xEE}, 16)),
		rec(1, 0, &ud, []byte("datagram")), rec(2, 0, &gsi, mad), rec(0x20|3, 0, &send, nil),
		rec(2, 0, &gsi, listened), rec(2, 0, &gsi, listened)}, nil))
	// The CM MADs of a kernel-rxe rdma_cm connection as they were on the
	// wire (REQ, REP, RTU twice, then DREQ and DREP twice), each to QP1
	// with its ICRC made again for the pipe's addresses: the REQs are
	// for the listener's port.
	var kernel []byte
	for _, pkt := range captureQP1(f, "../testdata/captures/kernel-rxe_rdmacm_send_4KiB.pcap") {
		kernel = append(kernel, 2, 0, byte(len(pkt)>>8), byte(len(pkt)))
		kernel = append(kernel, pkt...)
	}
	f.Add(kernel)
	f.Fuzz(fuzzDeviceReceive)
}

// fuzzDeviceReceive is FuzzDeviceReceive's body: it injects the records of
// in and checks what FuzzDeviceReceive says.
func fuzzDeviceReceive(t *testing.T, in []byte) {
	fuzzLeakCheck(t)
	ca, cb := netdev.NewPipeWith(netdev.PipeOptions{Depth: 4096, BatchSize: fuzzBatch})
	da, db := openPair(t, ca, cb)
	a := smallEnd(t, da, nil, qpOpts{})
	b := smallEnd(t, db, nil, qpOpts{})
	link(t, a, b, qpOpts{}, qpOpts{})
	u := smallEnd(t, db, nil, qpOpts{typ: QPTypeUD, cqe: 64, sendWR: 8, recvWR: 8})
	readyUD(t, u, fuzzQKey)
	// A listener queues the REQs for it that RDMA CM could make.
	_, err := db.ListenCM(fuzzCMPort, CMOptions{PD: b.pd, SendCQ: b.cq, RecvCQ: b.cq})
	require.NoError(t, err)
	// The remote region, the receive buffers, and a region that a
	// peer may read but neither write nor receive into.
	// aux reaches from before the start of the remote regions past
	// their end.
	rback, rmid := guarded(240, 0xA5)
	vback, vmid := guarded(1024, 0x5A)
	qback, qmid := guarded(240, 0x3C)
	rmr, err := b.pd.RegMR(rmid, AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic)
	require.NoError(t, err)
	vmr, err := b.pd.RegMR(vmid, AccessLocalWrite)
	require.NoError(t, err)
	qmr, err := b.pd.RegMR(qmid, AccessLocalWrite|AccessRemoteRead)
	require.NoError(t, err)
	vud, err := u.pd.RegMR(vmid, AccessLocalWrite)
	require.NoError(t, err)
	for i := range 4 {
		_, err := b.qp.PostRecv(RecvWR{ID: uint64(i), SGList: []SGE{vmr.SGE(i*128, 128)}})
		require.NoError(t, err)
		_, err = u.qp.PostRecv(RecvWR{ID: uint64(100 + i), SGList: []SGE{vud.SGE(512+i*128, 128)}})
		require.NoError(t, err)
	}
	epsn := packet.PSN(b.qp.Query().RQPSN)
	ph := packet.PseudoHeader{Src: ca.LocalAddr().Addr(), Dst: cb.LocalAddr().Addr(),
		SrcPort: ca.LocalAddr().Port(), DstPort: cb.LocalAddr().Port(), IPFlags: packet.IPv4FlagDF}
	accA, accB, sentA, sentB := accounted(da), accounted(db), sentDatagrams(da), sentDatagrams(db)
	injected := uint64(0)
	for len(in) >= 4 {
		sel, aux, n := in[0], in[1], min(int(binary.BigEndian.Uint16(in[2:])), len(in)-4, 4096)
		pkt := bytes.Clone(in[4 : 4+n])
		in = in[4+n:]
		if len(pkt) >= packet.BTHSize {
			bt := packet.BTH(pkt)
			switch sel & 3 {
			case 0:
				bt.SetDestQP(b.qp.QPN())
			case 1:
				bt.SetDestQP(u.qp.QPN())
			case 2:
				bt.SetDestQP(packet.GSIQPN)
			}
			if sel&4 != 0 {
				bt.SetPSN(epsn.Add(int(sel >> 6)))
			}
		}
		if sel&8 != 0 {
			mr := rmr
			if sel&16 != 0 {
				mr = qmr
			}
			va, rk := mr.Addr()+uint64(aux)-8, mr.RKey()
			if p, err := packet.Parse(pkt); err == nil {
				if h := p.Header(packet.HdrRETH); h != nil {
					binary.BigEndian.PutUint64(h, va)
					binary.BigEndian.PutUint32(h[8:], rk)
				} else if h := p.Header(packet.HdrAtomicETH); h != nil {
					binary.BigEndian.PutUint64(h, va&^7)
					binary.BigEndian.PutUint32(h[8:], rk)
				}
			}
		}
		if sel&0x20 == 0 {
			_ = ph.SetICRC(pkt) // too short: sent as it is
		}
		k, err := ca.WriteBatch([]netdev.Message{{Buf: pkt, N: len(pkt), Addr: cb.LocalAddr()}})
		require.NoError(t, err)
		require.Equal(t, 1, k)
		injected++
	}
	// Every datagram is counted once by the device that received it.
	testutil.Until(t, func() bool {
		return accounted(db)-accB == injected+sentDatagrams(da)-sentA && accounted(da)-accA == sentDatagrams(db)-sentB
	}, "b counted %d of %d injected and %d from a; a counted %d of %d from b",
		accounted(db)-accB, injected, sentDatagrams(da)-sentA, accounted(da)-accA, sentDatagrams(db)-sentB)
	wcs := make([]WC, 64)
	seen := map[uint64]bool{}
	for _, cq := range []*CQ{b.cq, u.cq} {
		for _, wc := range wcs[:cq.Poll(wcs)] {
			// b posted no send: every completion is of a receive.
			require.True(t, wc.ID < 4 || wc.ID >= 100 && wc.ID < 104, "completion of WR %d, never posted", wc.ID)
			require.False(t, seen[wc.ID], "receive WR %d completed twice", wc.ID)
			seen[wc.ID] = true
		}
	}
	require.NoError(t, da.Close())
	require.NoError(t, db.Close())
	// The devices are closed: their goroutines no longer touch memory.
	for _, g := range []struct {
		name string
		back []byte
		fill byte
	}{{"remote region", rback, 0xA5}, {"receive buffers", vback, 0x5A}, {"read-only region", qback, 0x3C}} {
		// One comparison of each guard; the loop names the first byte
		// written only when one was.
		if fill := bytes.Repeat([]byte{g.fill}, fuzzGuard); !bytes.Equal(fill, g.back[:fuzzGuard]) || !bytes.Equal(fill, g.back[len(g.back)-fuzzGuard:]) {
			for i := range fuzzGuard {
				require.Equal(t, g.fill, g.back[i], "%s: byte %d before it written", g.name, fuzzGuard-i)
				require.Equal(t, g.fill, g.back[len(g.back)-1-i], "%s: byte %d after it written", g.name, i)
			}
		}
	}
	require.Equal(t, bytes.Repeat([]byte{0x3C}, len(qmid)), qmid, "region without remote write rights or receives written")
}

// fuzzLeakCheck is checkGoroutines for one input of FuzzDeviceReceive:
// it fails t if goroutines of gorxe packages started during t outlive it
// by more than leakWait, and looks for them with testutil.Within's
// back-off from a few microseconds rather than every millisecond, since
// the devices' goroutines end moments after their Close. Call it before
// creating the devices, so that its cleanup runs after theirs.
func fuzzLeakCheck(t *testing.T) {
	t.Helper()
	before := gorxeGoroutines()
	t.Cleanup(func() {
		var leaked []string
		testutil.Within(leakWait, func() bool {
			leaked = leaked[:0]
			for id, stack := range gorxeGoroutines() {
				if _, ok := before[id]; !ok {
					leaked = append(leaked, stack)
				}
			}
			return len(leaked) == 0
		})
		if len(leaked) > 0 {
			slices.Sort(leaked)
			t.Errorf("%d goroutines outlived the input:\n\n%s", len(leaked), strings.Join(leaked, "\n\n"))
		}
	})
}

// fuzzBatch is the batch size of FuzzDeviceReceive's pipe: the most
// datagrams a device reads at once, and so the size of its receive and
// transmit buffer rings, allocated for each input. An input's records
// are sent one datagram at a time, so batches of more than a few
// datagrams are rare; 8 still reads several at once.
const fuzzBatch = 8

// fuzzQKey is the Q_Key of FuzzDeviceReceive's UD QP, fuzzCMPort the
// port of its device's CM listener: perftest's, which the kernel-rxe
// capture's REQs ask for.
const (
	fuzzQKey   = 0x1234
	fuzzCMPort = 18515
)

// captureQP1 returns the RoCEv2 packets (the UDP payloads) to QP1 of a
// classic little-endian Ethernet/IPv4 pcap.
func captureQP1(t testing.TB, path string) [][]byte {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, uint32(0xa1b2c3d4), binary.LittleEndian.Uint32(b), "a little-endian pcap")
	var out [][]byte
	for off := 24; off+16 <= len(b); {
		n := int(binary.LittleEndian.Uint32(b[off+8:]))
		frame := b[off+16 : off+16+n]
		off += 16 + n
		if len(frame) < 42 || binary.BigEndian.Uint16(frame[12:]) != 0x0800 || frame[23] != 17 || binary.BigEndian.Uint16(frame[36:]) != 4791 {
			continue
		}
		p, err := packet.Parse(frame[42:])
		require.NoError(t, err)
		if p.DestQP() == packet.GSIQPN {
			out = append(out, bytes.Clone(frame[42:]))
		}
	}
	require.NotEmpty(t, out, "no packet to QP1 in %s", path)
	return out
}
