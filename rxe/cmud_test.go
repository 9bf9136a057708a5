package rxe

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// udServe answers the next request of l with qp and private data pd, and
// returns the request (or the error) on the channel.
func udServe(ctx context.Context, l *UDListener, qp *QP, pd []byte) <-chan *UDRequest {
	ch := make(chan *UDRequest, 1)
	go func() {
		r, err := l.Accept(ctx)
		if err == nil {
			err = r.Answer(qp, pd)
		}
		if err != nil {
			r = nil
		}
		ch <- r
	}()
	return ch
}

// TestDialUD: a client resolves a UD service through the RDMA CM (SIDR)
// over the pipe and loopback UDP, learns the server's QPN and Q_Key and
// the private data both ways, and a UD SEND through the address handle it
// got arrives at the server's QP.
func TestDialUD(t *testing.T) {
	for _, kind := range []string{"pipe", "udp"} {
		t.Run(kind, func(t *testing.T) {
			da, db := cmDevices(t, kind)
			a, b := newTypedEnd(t, da, QPTypeUD), newTypedEnd(t, db, QPTypeUD)
			readyUD(t, a, RDMAUDPQKey)
			readyUD(t, b, RDMAUDPQKey)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			l, err := db.ListenUD(7471)
			require.NoError(t, err)
			defer l.Close()
			served := udServe(ctx, l, b.qp, []byte("welcome"))
			peer, err := DialUD(ctx, da, db.Addr().Addr().String()+":7471",
				UDOptions{PD: a.pd, PrivateData: []byte("hello"), LocalPort: 40001})
			require.NoError(t, err)
			r := <-served
			require.NotNil(t, r)
			require.Equal(t, b.qp.QPN(), peer.QPN)
			require.Equal(t, uint32(RDMAUDPQKey), peer.QKey)
			require.Equal(t, "welcome", string(peer.PrivateData[:7]))
			require.Len(t, peer.PrivateData, packet.SIDRREPPrivateDataSize)
			require.Equal(t, netip.AddrPortFrom(da.Addr().Addr(), 40001), peer.LocalAddr)
			require.Equal(t, uint16(7471), peer.RemoteAddr.Port())
			require.Equal(t, "hello", string(r.PrivateData[:5]))
			require.Len(t, r.PrivateData, SIDRPrivateDataSize)
			require.Equal(t, peer.LocalAddr, r.Remote)

			postRecvs(t, b, 1, 256)
			copy(a.buf, "ping")
			_, err = a.qp.PostSend(SendWR{ID: 1, Opcode: WRSend, Flags: SendSignaled, AH: peer.AH, RemoteQPN: peer.QPN,
				RemoteQKey: peer.QKey, SGList: []SGE{{Addr: a.mr.Addr(), Length: 4, LKey: a.mr.LKey()}}})
			require.NoError(t, err)
			require.Equal(t, WCSuccess, waitWC(t, a.cq).Status)
			wc := waitWC(t, b.cq)
			require.Equal(t, WCSuccess, wc.Status)
			require.Equal(t, uint32(GRHSize+4), wc.ByteLen)
			require.Equal(t, a.qp.QPN(), wc.SrcQP)
			syncMem(a, b)
			require.Equal(t, "ping", string(b.buf[GRHSize:GRHSize+4]))
			require.Zero(t, cmAgentLen(da), "nothing kept after a resolution")
			require.Zero(t, cmAgentLen(db))
		})
	}
}

// TestDialUDErrors: the ways a resolution fails, each at once or within
// its bounded retries.
func TestDialUDErrors(t *testing.T) {
	da, db, mb := mutedCMDevices(t)
	a, b := newTypedEnd(t, da, QPTypeUD), newTypedEnd(t, db, QPTypeUD)
	readyUD(t, b, RDMAUDPQKey)
	target := db.Addr().Addr().String() + ":7471"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	t.Run("nobody listens", func(t *testing.T) {
		start := time.Now()
		_, err := DialUD(ctx, da, target, UDOptions{PD: a.pd})
		var se *SIDRError
		require.ErrorAs(t, err, &se)
		require.Equal(t, uint8(packet.SIDRServiceIDNotSup), se.Status)
		require.Contains(t, err.Error(), "service ID not supported")
		require.Less(t, time.Since(start), 4*time.Second, "refused at once, not after a retry")
	})
	t.Run("a TCP port space listener is no UD service", func(t *testing.T) {
		listenEnd(t, db, newCMEnd(t, db), 7471, CMOptions{})
		_, err := DialUD(ctx, da, target, UDOptions{PD: a.pd})
		var se *SIDRError
		require.ErrorAs(t, err, &se)
		require.Equal(t, uint8(packet.SIDRServiceIDNotSup), se.Status)
	})
	t.Run("rejected with private data", func(t *testing.T) {
		l, err := db.ListenUD(7471)
		require.NoError(t, err)
		defer l.Close()
		go func() {
			if r, err := l.Accept(ctx); err == nil {
				_ = r.Reject([]byte("busy"))
			}
		}()
		_, err = DialUD(ctx, da, target, UDOptions{PD: a.pd})
		var se *SIDRError
		require.ErrorAs(t, err, &se)
		require.Equal(t, uint8(packet.SIDRRejected), se.Status)
		require.Equal(t, "busy", string(se.PrivateData[:4]))
	})
	t.Run("Q_Key mismatch", func(t *testing.T) {
		other := newTypedEnd(t, db, QPTypeUD)
		readyUD(t, other, 0x11111111)
		l, err := db.ListenUD(7471)
		require.NoError(t, err)
		defer l.Close()
		served := udServe(ctx, l, other.qp, nil)
		_, err = DialUD(ctx, da, target, UDOptions{PD: a.pd})
		require.ErrorIs(t, err, ErrQKeyMismatch)
		require.NotNil(t, <-served)
		// A client that expects that Q_Key takes it.
		served = udServe(ctx, l, other.qp, nil)
		peer, err := DialUD(ctx, da, target, UDOptions{PD: a.pd, QKey: 0x11111111})
		require.NoError(t, err)
		require.Equal(t, other.qp.QPN(), peer.QPN)
		require.NotNil(t, <-served)
	})
	t.Run("arguments", func(t *testing.T) {
		_, err := DialUD(ctx, da, target, UDOptions{})
		require.ErrorIs(t, err, ErrInvalidArgument)
		_, err = DialUD(ctx, da, target, UDOptions{PD: b.pd})
		require.ErrorIs(t, err, ErrInvalidArgument, "a PD of another device")
		_, err = DialUD(ctx, da, target, UDOptions{PD: a.pd, PrivateData: make([]byte, SIDRPrivateDataSize+1)})
		require.ErrorIs(t, err, ErrInvalidArgument)
		l, err := db.ListenUD(7472)
		require.NoError(t, err)
		defer l.Close()
		_, err = db.ListenUD(7472)
		require.ErrorIs(t, err, ErrInvalidArgument, "listened on already")
		answers := make(chan []error, 1)
		go func() {
			r, err := l.Accept(ctx)
			if err != nil {
				answers <- []error{err}
				return
			}
			answers <- []error{
				r.Answer(a.qp, nil), // another device's QP
				r.Answer(b.qp, make([]byte, packet.SIDRREPPrivateDataSize+1)),
				r.Answer(b.qp, nil),
				r.Answer(b.qp, nil), // answered already
			}
		}()
		_, err = DialUD(ctx, da, db.Addr().Addr().String()+":7472", UDOptions{PD: a.pd})
		errs := <-answers
		require.Len(t, errs, 4, "%v", errs)
		require.ErrorIs(t, errs[0], ErrInvalidArgument)
		require.ErrorIs(t, errs[1], ErrInvalidArgument)
		require.NoError(t, errs[2])
		require.ErrorIs(t, errs[3], ErrInvalidState)
		require.NoError(t, err, "answered after the refused calls")
	})
	t.Run("no answer: bounded retries", func(t *testing.T) {
		l, err := db.ListenUD(7471)
		require.NoError(t, err)
		defer l.Close()
		mb.mute.Store(true)
		defer mb.mute.Store(false)
		start := time.Now()
		_, err = DialUD(ctx, da, target, UDOptions{PD: a.pd, Wait: 20 * time.Millisecond, MaxCMRetries: 2})
		require.ErrorIs(t, err, ErrCMTimeout)
		require.GreaterOrEqual(t, time.Since(start), 60*time.Millisecond, "three tries of 20 ms")
		require.Equal(t, uint64(2), da.GSICounters().CM.Retransmits)
		// The server saw the first request and drops its repeats until
		// it is answered: Accept takes one.
		r, err := l.Accept(ctx)
		require.NoError(t, err)
		require.Equal(t, uint64(2), db.GSICounters().CM.Duplicates)
		require.NoError(t, r.Reject(nil))
	})
	t.Run("context ends the wait", func(t *testing.T) {
		l, err := db.ListenUD(7471)
		require.NoError(t, err)
		defer l.Close()
		cctx, ccancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer ccancel()
		_, err = DialUD(cctx, da, target, UDOptions{PD: a.pd}) // nobody answers
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Zero(t, cmAgentLen(da), "the resolution is withdrawn")
	})
}

// TestUDListenerClose: Close refuses the queued requests with "rejected"
// and ends the Accepts; the device's Close ends a DialUD.
func TestUDListenerClose(t *testing.T) {
	da, db := cmDevices(t, "pipe")
	a := newTypedEnd(t, da, QPTypeUD)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := db.ListenUD(7471)
	require.NoError(t, err)
	dialed := make(chan error, 1)
	go func() {
		_, err := DialUD(ctx, da, db.Addr().Addr().String()+":7471", UDOptions{PD: a.pd})
		dialed <- err
	}()
	require.Eventually(t, func() bool { return len(l.reqs) == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, l.Close())
	require.ErrorIs(t, l.Close(), ErrClosed)
	var se *SIDRError
	require.ErrorAs(t, returnsWithin(t, dialed, "DialUD"), &se)
	require.Equal(t, uint8(packet.SIDRRejected), se.Status)
	_, err = l.Accept(ctx)
	require.ErrorIs(t, err, ErrClosed)

	l, err = db.ListenUD(7471)
	require.NoError(t, err)
	accepted := make(chan error, 1)
	go func() {
		_, err := l.Accept(ctx)
		accepted <- err
	}()
	go func() {
		_, err := DialUD(ctx, da, "127.0.0.9:7471", UDOptions{PD: a.pd}) // nobody there
		dialed <- err
	}()
	require.Eventually(t, func() bool { return cmAgentLen(da) == 1 }, 5*time.Second, time.Millisecond)
	db.Close()
	da.Close()
	require.ErrorIs(t, returnsWithin(t, accepted, "Accept"), ErrClosed)
	require.ErrorIs(t, returnsWithin(t, dialed, "DialUD"), ErrClosed)
}

// cmAgentLen returns how many connections and resolutions d's CM tracks.
func cmAgentLen(d *Device) int {
	g := d.gsiOf()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.agent.Len()
}

// unhex decodes hex written in columns: spaces and newlines are skipped,
// and so is everything after a '|' on its line (a comment).
func unhex(t *testing.T, s string) []byte {
	t.Helper()
	var digits strings.Builder
	for _, line := range strings.Split(s, "\n") {
		line, _, _ = strings.Cut(line, "|")
		digits.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(digits.String())
	require.NoError(t, err)
	return b
}

// sidrREQGolden returns the SIDR_REQ message area after its request ID,
// for RDMA CM port 18515, as librdmacm over kernel ib_cm fills it
// (cm_format_sidr_req, cma_format_hdr), from src:sport to dst (IPv4, in
// hex), followed by private data pd (hex), the rest zero.
func sidrREQGolden(t *testing.T, src, dst, sport, pd string) []byte {
	b := make([]byte, packet.CMDataSize-4)
	copy(b, unhex(t, `
		ffff 0000                                 | P_Key, reserved
		0000 0000 0111 4853                       | service ID: RDMA_PS_UDP (0x0111), port 18515
		00 40 `+sport+`                           | CMA version 0, IP version 4 (high nibble), source port
		0000 0000 0000 0000 0000 0000 `+src+`     | source address, IPv4 in the last 4 bytes
		0000 0000 0000 0000 0000 0000 `+dst+`     | destination address
		`+pd+`                                    | the consumer's private data`))
	return b
}

// cmMADHeaderGolden returns the MAD header of a CM message of attribute
// attr (hex) in transaction tid, as kernel ib_cm fills it
// (cm_format_mad_hdr): base version 1, class CM (0x07), class version 2,
// method Send, status 0, no class-specific bits, the attribute, reserved
// 0, attribute modifier 0.
func cmMADHeaderGolden(t *testing.T, tid uint64, attr string) []byte {
	return unhex(t, `
		01 07 02 03 0000 0000                     | base version, class, class version, method; status, class specific
		`+fmt.Sprintf("%016x", tid)+`             | transaction ID
		`+attr+` 0000 00000000                    | attribute ID, reserved, attribute modifier`)
}

// TestSIDRGolden: the SIDR_REQ of a DialUD and the SIDR_REP of an Answer
// are byte for byte what librdmacm over kernel ib_cm sends (cma_format_hdr
// and cm_format_sidr_req: request ID, P_Key 0xFFFF, the RDMA_PS_UDP
// service ID 0x0000000001110000 | port, RDMA CM's IP header, the private
// data; cm_format_sidr_rep: the request's ID, transaction and service ID,
// status 0, QPN, Q_Key 0x01234567, the private data at byte 96), MAD
// header included, and a
// SIDR_REP laid out by hand as the kernel's gives the client its QPN.
func TestSIDRGolden(t *testing.T) {
	d, p := newRawCM(t) // the device 127.0.0.1, the raw peer 127.0.0.2
	e := newTypedEnd(t, d, QPTypeUD)
	readyUD(t, e, RDMAUDPQKey)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	type result struct {
		peer *UDPeer
		err  error
	}
	res := make(chan result, 1)
	go func() {
		peer, err := DialUD(ctx, d, "127.0.0.2:18515", UDOptions{PD: e.pd, PrivateData: []byte{0xAA, 0xBB}, LocalPort: 0xC001})
		res <- result{peer, err}
	}()
	var m rawMAD
	for m = p.next(); m.attr != packet.AttrSIDRREQ; m = p.next() {
	}
	reqID := m.msg[:4]
	require.Equal(t, uint32(m.tid), uint32(reqID[3])<<24|uint32(reqID[2])<<16|uint32(reqID[1])<<8|uint32(reqID[0]),
		"the transaction's low half is the request ID, little-endian (kernel cm_form_tid)")
	golden := sidrREQGolden(t, "7f000001", "7f000002", "c001", "aabb")
	require.Equal(t, hex.EncodeToString(golden), hex.EncodeToString(m.msg[4:]), "SIDR_REQ after its request ID")
	require.Equal(t, hex.EncodeToString(cmMADHeaderGolden(t, m.tid, "0017")), hex.EncodeToString(m.hdr), "SIDR_REQ's MAD header")

	// The kernel's SIDR_REP: request ID, status 0, no additional
	// information, QPN 0x000123, service ID, Q_Key, private data "ok".
	rep := make([]byte, packet.CMDataSize)
	copy(rep, reqID)
	copy(rep[8:], unhex(t, "000123 00 | QPN, vendor ID low byte\n 0000000001114853 | service ID\n 01234567 | Q_Key"))
	copy(rep[96:], "ok")
	var decoded packet.SIDRREP
	require.NoError(t, decoded.Decode(rep))
	p.send(m.tid, &decoded)
	r := <-res
	require.NoError(t, r.err)
	require.Equal(t, uint32(0x123), r.peer.QPN)
	require.Equal(t, uint32(RDMAUDPQKey), r.peer.QKey)
	require.Equal(t, "ok", string(r.peer.PrivateData[:2]))

	// The server side: the raw peer's SIDR_REQ, as librdmacm builds it,
	// answered by Answer.
	l, err := d.ListenUD(18515)
	require.NoError(t, err)
	defer l.Close()
	served := udServe(ctx, l, e.qp, []byte{0x55})
	sreq := make([]byte, packet.CMDataSize)
	copy(sreq, unhex(t, "12345678"))
	copy(sreq[4:], sidrREQGolden(t, "7f000002", "7f000001", "9c41", ""))
	var sr packet.SIDRREQ
	require.NoError(t, sr.Decode(sreq))
	p.send(0x0000000a78563412, &sr)
	for m = p.next(); m.attr != packet.AttrSIDRREP; m = p.next() {
	}
	require.Equal(t, hex.EncodeToString(cmMADHeaderGolden(t, 0x0000000a78563412, "0018")), hex.EncodeToString(m.hdr),
		"SIDR_REP's MAD header, in the request's transaction")
	got := m.msg
	wantREP := make([]byte, packet.CMDataSize)
	copy(wantREP, unhex(t, "12345678 | request ID\n 00 00 0000 | status valid, no additional information, vendor ID"))
	copy(wantREP[8:], []byte{byte(e.qp.QPN() >> 16), byte(e.qp.QPN() >> 8), byte(e.qp.QPN()), 0})
	copy(wantREP[12:], unhex(t, "0000000001114853 | service ID\n 01234567 | Q_Key"))
	wantREP[96] = 0x55
	require.Equal(t, hex.EncodeToString(wantREP), hex.EncodeToString(got))
	req := <-served
	require.NotNil(t, req)
	require.Equal(t, "127.0.0.2:40001", req.Remote.String())
}

// TestUDListenerCloseQueued: Close answers each request still queued for
// an Accept with status "rejected" (2), as kernel rdma_cm does when its
// listener goes (ucma_cleanup_ctx_events destroys the ids of connect
// requests not yet delivered, and cm_destroy_id answers a SIDR_REQ
// received and unanswered with IB_SIDR_REJECT); a request an Accept took
// stays for its Answer; a request after Close finds no listener and gets
// "service ID not supported" (1).
func TestUDListenerCloseQueued(t *testing.T) {
	da, db := cmDevices(t, "pipe")
	a, b := newTypedEnd(t, da, QPTypeUD), newTypedEnd(t, db, QPTypeUD)
	readyUD(t, b, RDMAUDPQKey)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	target := db.Addr().Addr().String() + ":7471"
	l, err := db.ListenUD(7471)
	require.NoError(t, err)

	type result struct {
		peer *UDPeer
		err  error
	}
	dial := func(port uint16) <-chan result {
		ch := make(chan result, 1)
		go func() {
			peer, err := DialUD(ctx, da, target, UDOptions{PD: a.pd, LocalPort: port})
			ch <- result{peer, err}
		}()
		return ch
	}
	wait := func(ch <-chan result) result {
		t.Helper()
		select {
		case r := <-ch:
			return r
		case <-ctx.Done():
			t.Fatal("DialUD did not return")
			return result{}
		}
	}
	first := dial(40001)
	require.Eventually(t, func() bool { return len(l.reqs) == 1 }, 10*time.Second, time.Millisecond)
	second := dial(40002)
	require.Eventually(t, func() bool { return len(l.reqs) == 2 }, 10*time.Second, time.Millisecond)
	taken, err := l.Accept(ctx)
	require.NoError(t, err)
	require.Equal(t, uint16(40001), taken.Remote.Port())

	require.NoError(t, l.Close())
	r := wait(second)
	var se *SIDRError
	require.ErrorAs(t, r.err, &se)
	require.Equal(t, uint8(packet.SIDRRejected), se.Status, "queued, never taken")

	require.NoError(t, taken.Answer(b.qp, nil))
	r = wait(first)
	require.NoError(t, r.err, "taken by an Accept before Close")
	require.Equal(t, b.qp.QPN(), r.peer.QPN)

	r = wait(dial(40003))
	require.ErrorAs(t, r.err, &se)
	require.Equal(t, uint8(packet.SIDRServiceIDNotSup), se.Status, "after Close: no listener")
	require.Zero(t, cmAgentLen(db))
}

// TestListenUDDestination: a SIDR_REQ whose RDMA CM IP header names another
// destination than the device's address, or names it in the other IP
// version, is refused with status "rejected" (2) in its transaction and
// never reaches Accept, as kernel rdma_cm finds no listener bound to that
// address (cma_ib_id_from_event → cma_find_listener →
// cma_match_private_data) and ib_cm then answers the SIDR_REQ it received
// with IB_SIDR_REJECT (cm_sidr_req_handler → cm_destroy_id). One that
// names the device's address reaches Accept.
func TestListenUDDestination(t *testing.T) {
	d, p := newRawCM(t) // the device 127.0.0.1, the raw peer 127.0.0.2
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := d.ListenUD(18515)
	require.NoError(t, err)
	defer l.Close()
	sidrREQ := func(id uint32, dst netip.Addr) *packet.SIDRREQ {
		r := &packet.SIDRREQ{RequestID: id, PKey: packet.DefaultPKey, ServiceID: packet.RDMACMServiceID(packet.RDMACMProtoUDP, 18515)}
		(&packet.CMIPHeader{SrcPort: 40000, Src: p.addr(), Dst: dst}).Encode(r.PrivateData[:])
		return r
	}
	for i, dst := range []netip.Addr{
		netip.MustParseAddr("127.0.0.9"),        // another node's address
		netip.MustParseAddr("::ffff:127.0.0.1"), // IPv6 header: the device has an IPv4 address
	} {
		req := sidrREQ(uint32(0x100+i), dst)
		if dst.Is4In6() { // CMIPHeader.Encode writes IPv4 when both are IPv4 or mapped
			req.PrivateData[1] = 0x60
			copy(req.PrivateData[4:20], netip.AddrFrom16(p.addr().As16()).AsSlice())
			copy(req.PrivateData[20:36], dst.AsSlice())
		}
		tid := uint64(0x0000000a00000000) | uint64(i)
		p.send(tid, req)
		var rep packet.SIDRREP
		require.Equal(t, tid, p.recv(packet.AttrSIDRREP, &rep), "in the SIDR_REQ's transaction")
		require.Equal(t, packet.SIDRREP{RequestID: req.RequestID, Status: packet.SIDRRejected, ServiceID: req.ServiceID}, rep, "destination %v", dst)
	}
	require.Zero(t, len(l.reqs), "nothing for Accept")
	require.Zero(t, cmAgentLen(d))

	p.send(0x0000000a000000ff, sidrREQ(0x1ff, d.Addr().Addr()))
	r, err := l.Accept(ctx)
	require.NoError(t, err)
	require.Equal(t, netip.AddrPortFrom(p.addr(), 40000), r.Remote)
	require.NoError(t, r.Reject(nil))
}

// TestListenUDBacklogFull: a SIDR_REQ that finds the listener's backlog
// full is refused with status 2 (rejected) in its transaction, as kernel
// rdma_cm refuses one beyond the rdma_listen backlog: its handler fails
// (ucma_connect_event_handler's -ENOMEM) and cm_destroy_id answers the
// SIDR_REQ received with IB_SIDR_REJECT, the -ENOMEM exception that drops a
// REQ unanswered being for REQs only. The request queued stays for
// Accept. The backlog is made 1 here.
func TestListenUDBacklogFull(t *testing.T) {
	d, p := newRawCM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := d.ListenUD(18515)
	require.NoError(t, err)
	defer l.Close()
	g := d.gsiOf()
	g.mu.Lock()
	l.reqs = make(chan udQueued, 1)
	g.mu.Unlock()
	for i := range 2 {
		r := &packet.SIDRREQ{RequestID: uint32(0x200 + i), PKey: packet.DefaultPKey, ServiceID: packet.RDMACMServiceID(packet.RDMACMProtoUDP, 18515)}
		(&packet.CMIPHeader{SrcPort: uint16(40000 + i), Src: p.addr(), Dst: d.Addr().Addr()}).Encode(r.PrivateData[:])
		p.send(uint64(0x0000000b00000000)|uint64(i), r)
	}
	var rep packet.SIDRREP
	require.Equal(t, uint64(0x0000000b00000001), p.recv(packet.AttrSIDRREP, &rep), "the second's transaction")
	require.Equal(t, uint32(0x201), rep.RequestID)
	require.Equal(t, uint8(packet.SIDRRejected), rep.Status)
	require.Equal(t, 1, cmAgentLen(d), "the first waits for Accept")

	r, err := l.Accept(ctx)
	require.NoError(t, err)
	require.Equal(t, netip.AddrPortFrom(p.addr(), 40000), r.Remote)
	require.NoError(t, r.Reject(nil))
	require.Equal(t, uint64(0x0000000b00000000), p.recv(packet.AttrSIDRREP, &rep))
	require.Equal(t, uint32(0x200), rep.RequestID)
	require.Zero(t, cmAgentLen(d))
}

// TestListenUDWithoutIPHeader: a SIDR_REQ for a ListenUD port whose
// private data does not begin with a valid RDMA CM IP header (here all
// zeros: IP version 0) is refused with status 2 (rejected) and never
// reaches Accept, as kernel rdma_cm refuses it before its consumer sees
// it (cma_save_ip_info or cma_match_private_data fails, and cm_destroy_id
// answers the SIDR_REQ received with IB_SIDR_REJECT), not with status 1:
// the port is served.
func TestListenUDWithoutIPHeader(t *testing.T) {
	d, p := newRawCM(t)
	l, err := d.ListenUD(18515)
	require.NoError(t, err)
	defer l.Close()
	req := &packet.SIDRREQ{RequestID: 0x300, PKey: packet.DefaultPKey, ServiceID: packet.RDMACMServiceID(packet.RDMACMProtoUDP, 18515)}
	p.send(0x0000000c00000000, req)
	var rep packet.SIDRREP
	require.Equal(t, uint64(0x0000000c00000000), p.recv(packet.AttrSIDRREP, &rep))
	require.Equal(t, packet.SIDRREP{RequestID: req.RequestID, Status: packet.SIDRRejected, ServiceID: req.ServiceID}, rep)
	require.Zero(t, len(l.reqs), "nothing for Accept")
	require.Zero(t, cmAgentLen(d))
}
