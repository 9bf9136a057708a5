package rxe

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/testutil"
)

// TestDeregWaitsForDevice deregisters a region while a peer streams an
// 8 MiB READ from it or WRITE into it, then reuses the buffer at once. Once
// Dereg returns the device must not touch the buffer again: no later READ
// response carries the bytes written after Dereg, no WRITE data lands after
// it, and the peer's access gets a Remote Access NAK. Under -race a device
// copy that outlives Dereg is also reported as a data race with the
// caller's access; it shows only when Dereg lands while a transmit or
// receive pass copies, so each case runs several rounds. A round whose
// transfer completed before Dereg checks the same properties but does not
// count: each case needs two rounds in which Dereg cut the transfer.
func TestDeregWaitsForDevice(t *testing.T) {
	const n = 8 << 20
	old, fresh := bytes.Repeat([]byte{0xAA}, n), bytes.Repeat([]byte{0x55}, n)
	cases := []struct {
		op WROpcode
		wc WCOpcode
	}{
		{WRRDMARead, WCRDMARead},
		{WRRDMAWrite, WCRDMAWrite},
	}
	for _, kind := range []string{"pipe", "udp", "udp-busypoll"} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%v", kind, c.op), func(t *testing.T) {
				cut := 0
				for round := 0; cut < 2; round++ {
					require.Less(t, round, 20, "Dereg never landed during the transfer")
					if deregDuringTransfer(t, kind, c.op, c.wc, old, fresh) {
						cut++
					}
				}
			})
		}
	}
}

// deregDuringTransfer is one round of TestDeregWaitsForDevice: op moves
// the bytes of old between two fresh devices of kind; b deregisters its
// region once the transfer is under way, then (for a READ) overwrites the
// source with fresh. It reports whether Dereg cut the transfer (the peer's
// access failed) rather than came after it. Kind "udp-busypoll" is "udp"
// with a goroutine spinning on b's CQ.BusyPoll throughout, so that b's
// requests are handled, and its READ responses sent, on that goroutine
// too.
func deregDuringTransfer(t *testing.T, kind string, op WROpcode, wcOp WCOpcode, old, fresh []byte) bool {
	n := len(old)
	busy := kind == "udp-busypoll"
	if busy {
		kind = "udp"
	}
	a, b := newPair(t, kind, MTU4096)
	if busy {
		stop, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			wcs := make([]WC, 4)
			for {
				select {
				case <-stop:
					return
				default:
					b.cq.BusyPoll(wcs)
				}
			}
		}()
		defer func() {
			close(stop)
			<-stopped
		}()
	}
	after := stopStream(t, a, b, op, old, fresh, b.mr.Dereg)

	wc := waitWC(t, a.cq)
	cut := wc.Status != WCSuccess
	if cut {
		require.Equal(t, wcBrief{1, WCRemAccessErr, wcOp}, wcBrief{wc.ID, wc.Status, wc.Opcode},
			"the peer's access after Dereg")
		waitState(t, b.qp, QPSErr)
	}
	syncMem(a, b)
	if op == WRRDMARead {
		require.Equal(t, -1, bytes.IndexByte(a.buf[:n], 0x55),
			"a READ response carried bytes written after Dereg returned")
	} else {
		require.True(t, bytes.Equal(after, b.buf[:n]), "WRITE data landed after Dereg returned")
	}
	return cut
}

// TestCloseWaitsForDevice is TestDeregWaitsForDevice for Device.Close: b's
// device, on a netdev it does not own (so Close does not wait for its
// goroutines to end), closes while a's 8 MiB READ streams from b's region,
// then b overwrites the region at once. No READ response built after Close
// returned may carry the new bytes (under -race, no device copy may race
// with the caller's write); a's READ fails (its retries go unanswered).
func TestCloseWaitsForDevice(t *testing.T) {
	const n = 8 << 20
	old, fresh := bytes.Repeat([]byte{0xAA}, n), bytes.Repeat([]byte{0x55}, n)
	for _, kind := range []string{"pipe", "udp"} {
		t.Run(kind, func(t *testing.T) {
			a, b := unownedPair(t, kind, n, qpOpts{timeout: 8, retryCnt: 1, mtu: MTU4096}, qpOpts{mtu: MTU4096})
			copy(b.buf, old)
			syncMem(a, b)
			startStream(t, a, b, WRRDMARead, n)
			require.NoError(t, b.dev.Close())
			copy(b.buf, fresh)
			wc := waitWC(t, a.cq)
			require.Equal(t, uint64(1), wc.ID)
			syncMem(a, a)
			if wc.Status == WCSuccess {
				t.Log("the READ completed before Close")
			} else {
				require.Equal(t, WCRetryExcErr, wc.Status)
			}
			require.Equal(t, -1, bytes.IndexByte(a.buf[:n], 0x55),
				"a READ response carried bytes written after Close returned")
		})
	}
}

// unownedPair is smallPair on devices that do not own their netdevs, with
// a registered buffer of size bytes on each side.
func unownedPair(t *testing.T, kind string, size int, oa, ob qpOpts) (*end, *end) {
	t.Helper()
	checkGoroutines(t)
	ca, cb := connPair(t, kind)
	da, err := Open(ca, Options{Name: "rxe-a", LinkMTU: 9000})
	require.NoError(t, err)
	db, err := Open(cb, Options{Name: "rxe-b", LinkMTU: 9000})
	require.NoError(t, err)
	t.Cleanup(func() {
		da.Close()
		db.Close()
		ca.Close()
		cb.Close()
		da.Wait()
		db.Wait()
	})
	a, b := smallEnd(t, da, nil, oa), smallEnd(t, db, nil, ob)
	link(t, a, b, oa, ob)
	for _, e := range []*end{a, b} {
		e.buf = make([]byte, size)
		mr, err := e.pd.RegMR(e.buf, AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead)
		require.NoError(t, err)
		e.mr = mr
	}
	return a, b
}

// TestDeregDuringClose: a Dereg, SRQ.Destroy or SRQSet.Destroy that finds
// the device closing must not return before the steps under way on the QPs
// of its PD have ended. Close marks the device closed, then takes each
// QP's lock to stop it; these calls used to return ErrClosed at once in
// between, while a step that began before Close (here: the test holding a
// QP's lock, as a transmit pass copying from a region or a receive placing
// a SEND into an SRQ WQE's buffer does) could still be copying, so the
// caller reused memory the device was touching.
func TestDeregDuringClose(t *testing.T) {
	cases := []struct {
		name string
		call func(t *testing.T, pd *PD, cq *CQ) (attach *SRQ, call func() error)
	}{
		{"MR.Dereg", func(t *testing.T, pd *PD, _ *CQ) (*SRQ, func() error) {
			mr, err := pd.RegMR(make([]byte, 4096), AccessLocalWrite|AccessRemoteWrite)
			require.NoError(t, err)
			return nil, mr.Dereg
		}},
		{"SRQ.Destroy", func(t *testing.T, pd *PD, _ *CQ) (*SRQ, func() error) {
			srq, err := pd.CreateSRQ(SRQAttr{MaxWR: 4, MaxSGE: 1})
			require.NoError(t, err)
			return srq, srq.Destroy
		}},
		{"SRQSet.Destroy", func(t *testing.T, pd *PD, cq *CQ) (*SRQ, func() error) {
			set, err := pd.CreateSRQSet(SRQAttr{MaxWR: 4, MaxSGE: 1})
			require.NoError(t, err)
			srq, err := set.For(cq)
			require.NoError(t, err)
			return srq, set.Destroy
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, _ := newDevices(t, "pipe")
			pd, err := d.AllocPD()
			require.NoError(t, err)
			cq, err := d.CreateCQ(16, -1)
			require.NoError(t, err)
			srq, call := c.call(t, pd, cq)
			qp, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, SRQ: srq,
				Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4}})
			require.NoError(t, err)

			qp.mu.Lock() // a step under way
			held := true // a failed require below frees the lock, or the cleanup's Close would wait for it
			defer func() {
				if held {
					qp.mu.Unlock()
				}
			}()
			closed := make(chan error, 1)
			go func() { closed <- d.Close() }()
			require.Eventually(t, d.closed.Load, testutil.Bound(), 100*time.Microsecond, "Close did not start")
			done := make(chan error, 1)
			go func() { done <- call() }()
			select {
			case err := <-done:
				t.Fatalf("returned (%v) while a step of a QP of the PD was under way", err)
			case <-time.After(50 * time.Millisecond):
			}
			held = false
			qp.mu.Unlock()
			for _, ch := range []chan error{done, closed} {
				select {
				case err := <-ch:
					if ch == done {
						require.ErrorIs(t, err, ErrClosed)
					} else {
						require.NoError(t, err)
					}
				case <-time.After(testutil.Bound()):
					t.Fatal("the call or Close did not return once the step ended")
				}
			}
		})
	}
}

// TestDeregSourceOfSend is TestDeregWaitsForDevice for the requester: a
// WRITE or SEND of 1 MiB gathers from a's region, or a READ of 1 MiB
// scatters into it, through a link that loses 2 % of a's packets, so that
// go-back-N (gbn) or selective repeat (sr) resends gather again and READ
// responses are placed out of order; a deregisters the region while the
// message is under way, then overwrites it. No packet built after Dereg
// returned may carry the new bytes, no READ response may land after it,
// and a message cut by Dereg completes with LOC_PROT_ERR (an L_Key that no
// longer names a region when the requester gathers or scatters: rxe's
// copy_data fails in rxe_req.c finish_packet or rxe_comp.c do_read, and
// the WQE completes with IB_WC_LOC_PROT_ERR).
func TestDeregSourceOfSend(t *testing.T) {
	const n = 1 << 20
	for _, sr := range []bool{false, true} {
		for _, op := range []WROpcode{WRRDMAWrite, WRSend, WRRDMARead} {
			t.Run(fmt.Sprintf("sr=%v/%v", sr, op), func(t *testing.T) {
				cut := 0
				for round := 0; cut < 2; round++ {
					require.Less(t, round, 20, "Dereg never landed during the transfer")
					if deregSource(t, sr, op, n) {
						cut++
					}
				}
			})
		}
	}
}

// deregSource is one round of TestDeregSourceOfSend; it reports whether
// Dereg cut the message.
func deregSource(t *testing.T, sr bool, op WROpcode, n int) bool {
	a, b, _ := faultyPairSR(t, 1, []string{"drop=2%,dir=send"}, sr)
	src, dst := a.buf[:n], b.buf[:n]
	if op == WRRDMARead {
		src, dst = dst, src
	}
	for i := range src {
		src[i] = 0xAA
	}
	clear(dst)
	syncMem(a, b)
	if op == WRSend {
		_, err := b.qp.PostRecv(RecvWR{ID: 9, SGList: []SGE{b.mr.SGE(0, n)}})
		require.NoError(t, err)
	}
	_, err := a.qp.PostSend(SendWR{ID: 1, Opcode: op, Flags: SendSignaled,
		SGList: []SGE{a.mr.SGE(0, n)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
	require.NoError(t, err)
	moved := &a.qp.vec.sentPkts
	if op == WRRDMARead {
		moved = &a.qp.vec.rcvdPkts
	}
	waitStarted(t, moved)
	require.NoError(t, a.mr.Dereg())
	for i := range a.buf[:n] {
		a.buf[i] = 0x55
	}
	wc := waitWC(t, a.cq)
	require.Equal(t, uint64(1), wc.ID)
	cut := wc.Status != WCSuccess
	if cut {
		require.Equal(t, WCLocProtErr, wc.Status, "the message whose local region went away")
	}
	// Whatever reached b came from before Dereg: let the link settle
	// (a's QP is in ERR or done), then look.
	waitState(t, a.qp, map[bool]QPState{true: QPSErr, false: QPSRTS}[cut])
	syncMem(a, b)
	if op == WRRDMARead {
		require.Equal(t, -1, bytes.IndexByte(a.buf[:n], 0xAA), "a READ response landed after Dereg returned")
	} else {
		require.Equal(t, -1, bytes.IndexByte(b.buf[:n], 0x55), "a packet built after Dereg carried the new bytes")
	}
	return cut
}

// TestDestroyWaitsForDevice is TestCloseWaitsForDevice for QP.Destroy: b
// destroys its QP while a's 8 MiB READ streams from b's region (b's
// responder gathers) or a's 8 MiB WRITE streams into it (b's responder
// places), then b reuses the region at once. No READ response built after
// Destroy returned may carry the new bytes, no WRITE data may land after
// it, and a's request fails (its retries go unanswered).
func TestDestroyWaitsForDevice(t *testing.T) {
	const n = 8 << 20
	old, fresh := bytes.Repeat([]byte{0xAA}, n), bytes.Repeat([]byte{0x55}, n)
	for _, op := range []WROpcode{WRRDMARead, WRRDMAWrite} {
		t.Run(op.String(), func(t *testing.T) {
			a, b := unownedPair(t, "pipe", n, qpOpts{timeout: 8, retryCnt: 1, mtu: MTU4096}, qpOpts{mtu: MTU4096})
			after := stopStream(t, a, b, op, old, fresh, b.qp.Destroy)
			wc := waitWC(t, a.cq)
			require.Equal(t, uint64(1), wc.ID)
			if wc.Status == WCSuccess {
				t.Log("the transfer completed before Destroy")
			} else {
				require.Equal(t, WCRetryExcErr, wc.Status)
			}
			syncMem(a, a)
			if op == WRRDMARead {
				require.Equal(t, -1, bytes.IndexByte(a.buf, 0x55), "a READ response carried bytes written after Destroy returned")
			} else {
				require.True(t, bytes.Equal(after, b.buf), "WRITE data landed after Destroy returned")
			}
		})
	}
}

// stopStream fills a's and b's buffers with old (b's first len(old)
// bytes cleared for a WRITE, which fills them again), starts op of
// len(old) bytes (startStream) and requires stop, b's end of it, to
// succeed; then b's buffer is its owner's again: a READ's source is
// overwritten with fresh, and a copy of a WRITE's target is returned, to
// hold against what the target holds once the WRITE has ended.
func stopStream(t *testing.T, a, b *end, op WROpcode, old, fresh []byte, stop func() error) (after []byte) {
	t.Helper()
	n := len(old)
	copy(a.buf, old)
	copy(b.buf, old)
	if op == WRRDMAWrite {
		clear(b.buf[:n])
	}
	syncMem(a, b)
	startStream(t, a, b, op, n)
	require.NoError(t, stop())
	if op == WRRDMARead {
		copy(b.buf, fresh)
		return nil
	}
	return bytes.Clone(b.buf[:n])
}

// startStream posts a signaled op of n bytes from a's MR to b's and waits
// until the stream is under way at b: 16 packets sent (READ responses) or
// received (WRITE), counted per vector with no QP lock taken.
func startStream(t *testing.T, a, b *end, op WROpcode, n int) {
	t.Helper()
	_, err := a.qp.PostSend(SendWR{ID: 1, Opcode: op, Flags: SendSignaled,
		SGList: []SGE{a.mr.SGE(0, n)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
	require.NoError(t, err)
	moved := &b.qp.vec.sentPkts
	if op == WRRDMAWrite {
		moved = &b.qp.vec.rcvdPkts
	}
	waitStarted(t, moved)
}

// waitStarted waits, up to testutil.Bound(), until the packet counter moved (a
// vector's sentPkts or rcvdPkts, read with no QP lock taken) reaches 16:
// the transfer is under way.
func waitStarted(t *testing.T, moved *atomic.Uint64) {
	t.Helper()
	deadline := time.Now().Add(testutil.Bound())
	for moved.Load() < 16 {
		require.True(t, time.Now().Before(deadline), "the transfer did not start")
		time.Sleep(20 * time.Microsecond)
	}
}

// TestDeregTwiceConcurrently: a second Dereg of a region whose first Dereg
// still waits for a step under way (the test holds a QP's lock, as a
// transmit pass copying from the region does) must not return before the
// first: its caller would reuse memory the device may still be copying.
// The first returns nil and the second ErrClosed once the step ends.
func TestDeregTwiceConcurrently(t *testing.T) {
	_, qp := stepPD(t)
	mr, err := qp.pd.RegMR(make([]byte, 4096), AccessLocalWrite|AccessRemoteWrite)
	require.NoError(t, err)
	twiceDuringStep(t, qp, mr.Dereg, func() bool { return !mr.valid.Load() })
	require.NoError(t, qp.Destroy())
	require.NoError(t, qp.pd.Dealloc(), "the region is no longer a user of its PD")
}

// TestCloseTwiceConcurrently: a second Device.Close during a first that
// still waits for a step under way must not return before the first has
// stopped every QP; its caller, told that the device is closed, would free
// memory the step may still be copying.
func TestCloseTwiceConcurrently(t *testing.T) {
	d, qp := stepPD(t)
	twiceDuringStep(t, qp, d.Close, d.closed.Load)
}

// stepPD returns a device over a pipe and an RC QP of a new PD on it.
func stepPD(t *testing.T) (*Device, *QP) {
	t.Helper()
	d, _ := newDevices(t, "pipe")
	pd, err := d.AllocPD()
	require.NoError(t, err)
	cq, err := d.CreateCQ(16, -1)
	require.NoError(t, err)
	qp, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4}})
	require.NoError(t, err)
	return d, qp
}

// twiceDuringStep makes call twice while the test holds qp's lock (a step
// under way): the first call once started reports that it has begun, the
// second after that. Neither may return while the step lasts; once it
// ends the first returns nil and the second ErrClosed.
func twiceDuringStep(t *testing.T, qp *QP, call func() error, started func() bool) {
	t.Helper()
	qp.mu.Lock()
	held := true // a failed require below frees the lock, or the cleanup's Close would wait for it
	defer func() {
		if held {
			qp.mu.Unlock()
		}
	}()
	first, second := make(chan error, 1), make(chan error, 1)
	go func() { first <- call() }()
	require.Eventually(t, started, testutil.Bound(), 100*time.Microsecond, "the first call did not start")
	go func() { second <- call() }()
	select {
	case err := <-first:
		t.Fatalf("the first call returned (%v) while a step of a QP was under way", err)
	case err := <-second:
		t.Fatalf("the second call returned (%v) while the first still waited for a step", err)
	case <-time.After(50 * time.Millisecond):
	}
	held = false
	qp.mu.Unlock()
	for i, want := range []error{nil, ErrClosed} {
		ch := []chan error{first, second}[i]
		select {
		case err := <-ch:
			if want == nil {
				require.NoError(t, err, "call %d", i+1)
			} else {
				require.ErrorIs(t, err, want, "call %d", i+1)
			}
		case <-time.After(testutil.Bound()):
			t.Fatalf("call %d did not return once the step ended", i+1)
		}
	}
}
