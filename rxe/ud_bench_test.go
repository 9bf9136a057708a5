package rxe

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"
)

// udBenchPair returns two UD QPs on loopback UDP devices, each with an AH
// to the other, receive queues of depth posted with buffers of size+40.
func udBenchPair(b *testing.B, size, depth int) (a, z *end, toZ, toA *AddrHandle) {
	da, dz := newDevices(b, "udp")
	mk := func(d *Device) *end {
		pd, err := d.AllocPD()
		if err != nil {
			b.Fatal(err)
		}
		cq, _ := d.CreateCQ(4*depth, -1)
		qp, err := pd.CreateQP(QPInitAttr{Type: QPTypeUD, SendCQ: cq, RecvCQ: cq,
			Cap: QPCap{MaxSendWR: depth, MaxRecvWR: depth, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, (depth+1)*(size+GRHSize))
		mr, _ := pd.RegMR(buf, AccessLocalWrite)
		e := &end{dev: d, pd: pd, cq: cq, qp: qp, mr: mr, buf: buf}
		for _, m := range []struct {
			a QPAttr
			k QPAttrMask
		}{
			{QPAttr{State: QPSInit, Port: 1, QKey: 0x11111111}, QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrQKey},
			{QPAttr{State: QPSRTR}, QPAttrState},
			{QPAttr{State: QPSRTS, SQPSN: 1}, QPAttrState | QPAttrSQPSN},
		} {
			if err := qp.Modify(&m.a, m.k); err != nil {
				b.Fatal(err)
			}
		}
		for i := range depth {
			e.postRecvSlot(b, i, size)
		}
		return e
	}
	a, z = mk(da), mk(dz)
	var err error
	if toZ, err = a.pd.CreateAH(AH{DGID: dz.GID(), UDPPort: dz.Addr().Port()}); err != nil {
		b.Fatal(err)
	}
	if toA, err = z.pd.CreateAH(AH{DGID: da.GID(), UDPPort: da.Addr().Port()}); err != nil {
		b.Fatal(err)
	}
	return a, z, toZ, toA
}

func (e *end) postRecvSlot(b *testing.B, slot, size int) {
	n := size + GRHSize
	if _, err := e.qp.PostRecv(RecvWR{ID: uint64(slot), SGList: []SGE{{Addr: e.mr.Addr() + uint64(slot*n), Length: uint32(n), LKey: e.mr.LKey()}}}); err != nil {
		b.Fatal(err)
	}
}

func (e *end) udSend(b *testing.B, ah *AddrHandle, qpn uint32, size int, id uint64, signaled bool) {
	f := SendFlags(0)
	if signaled {
		f = SendSignaled
	}
	for {
		_, err := e.qp.PostSend(SendWR{ID: id, Opcode: WRSend, Flags: f, AH: ah, RemoteQPN: qpn, RemoteQKey: 0x11111111,
			SGList: []SGE{{Addr: e.mr.Addr() + uint64(len(e.buf)-size), Length: uint32(size), LKey: e.mr.LKey()}}})
		if err == nil {
			return
		}
		// The send queue is full: take completions.
		e.cq.Poll(make([]WC, 16))
	}
}

// BenchmarkUDSendBW streams UD SENDs of 2 B and 4 KiB over loopback UDP
// (the send-bw of perftest -c UD): the sender keeps up to 512 sends
// posted, signalling every 64th, the receiver reposts each buffer as it
// completes. It reports the datagrams received per second, MB/s and the
// share lost (UD drops a datagram that finds no receive buffer), and, as
// the baseline measured in the same run, the same stream of RC SENDs
// between two RC QPs on loopback devices ("rc-" metrics, and the ratio).
func BenchmarkUDSendBW(b *testing.B) {
	for _, size := range []int{2, 4096} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			const depth = 512
			a, z, toZ, _ := udBenchPair(b, size, depth)
			ud := func(i int) { a.udSend(b, toZ, z.qp.QPN(), size, uint64(i), i%64 == 63) }
			b.ResetTimer()
			n, el := benchStreamSend(b, a, z, size, ud)
			b.StopTimer()
			ra, rz := rcBenchPair(b, size, depth)
			rc := func(i int) { ra.rcSend(b, size, uint64(i), i%64 == 63) }
			rn, rel := benchStreamSend(b, ra, rz, size, rc)
			rate, rcRate := float64(n)/el.Seconds(), float64(rn)/rel.Seconds()
			b.ReportMetric(rate, "rcvd-msg/s")
			b.ReportMetric(rate*float64(size)/1e6, "MB/s")
			b.ReportMetric(100*float64(b.N-n)/float64(b.N), "lost-%")
			b.ReportMetric(rcRate, "rc-msg/s")
			b.ReportMetric(rate/rcRate, "ud/rc")
		})
	}
}

// benchStreamSend posts b.N sends with post while a goroutine counts z's receive
// completions and reposts their buffers; it returns how many arrived and
// the time taken.
func benchStreamSend(b *testing.B, a, z *end, size int, post func(i int)) (int, time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rcvd := make(chan int, 1)
	go func() {
		n, wc := 0, make([]WC, 64)
		for {
			k, err := z.cq.Wait(ctx, wc)
			if err != nil {
				rcvd <- n
				return
			}
			for _, w := range wc[:k] {
				if w.Opcode == WCRecv {
					n++
					z.postRecvSlot(b, int(w.ID), size)
				}
			}
		}
	}()
	start := time.Now()
	wc := make([]WC, 64)
	for i := range b.N {
		post(i)
		if i%64 == 63 {
			a.cq.Poll(wc)
		}
	}
	// Let the last datagrams land (UD has no acknowledgement to wait for).
	const settle = 20 * time.Millisecond
	time.Sleep(settle)
	cancel()
	return <-rcvd, time.Since(start) - settle
}

// rcBenchPair returns two connected RC QPs on loopback devices, the
// receiver's queue posted with depth buffers of size.
func rcBenchPair(b *testing.B, size, depth int) (a, z *end) {
	a, z = newPair(b, "udp", MTU4096)
	for i := range min(depth, 256) {
		n := size + GRHSize
		if _, err := z.qp.PostRecv(RecvWR{ID: uint64(i), SGList: []SGE{{Addr: z.mr.Addr() + uint64(i*n), Length: uint32(n), LKey: z.mr.LKey()}}}); err != nil {
			b.Fatal(err)
		}
	}
	return a, z
}

func (e *end) rcSend(b *testing.B, size int, id uint64, signaled bool) {
	f := SendFlags(0)
	if signaled {
		f = SendSignaled
	}
	for {
		_, err := e.qp.PostSend(SendWR{ID: id, Opcode: WRSend, Flags: f, SGList: []SGE{{Addr: e.mr.Addr(), Length: uint32(size), LKey: e.mr.LKey()}}})
		if err == nil {
			return
		}
		e.cq.Poll(make([]WC, 16))
	}
}

// BenchmarkUDSendLat ping-pongs one UD SEND of 2 B or 4 KiB between two
// loopback devices (the send-lat of perftest -c UD) and reports half the
// round trip, as perftest does: the median and the 99th percentile.
func BenchmarkUDSendLat(b *testing.B) {
	for _, size := range []int{2, 4096} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			a, z, toZ, toA := udBenchPair(b, size, 64)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { // the echo side
				wc := make([]WC, 8)
				for {
					k, err := z.cq.Wait(ctx, wc)
					if err != nil {
						return
					}
					for _, w := range wc[:k] {
						if w.Opcode == WCRecv {
							z.postRecvSlot(b, int(w.ID), size)
							z.udSend(b, toA, a.qp.QPN(), size, 0, true)
						}
					}
				}
			}()
			lat := make([]time.Duration, 0, b.N)
			wc := make([]WC, 8)
			b.ResetTimer()
			for i := range b.N {
				t := time.Now()
				a.udSend(b, toZ, z.qp.QPN(), size, uint64(i), true)
				for got := false; !got; {
					wctx, wcancel := context.WithTimeout(ctx, time.Second)
					k, err := a.cq.Wait(wctx, wc)
					wcancel()
					if err != nil {
						b.Fatalf("round trip %d lost: %v", i, err)
					}
					for _, w := range wc[:k] {
						if w.Opcode == WCRecv {
							got = true
							a.postRecvSlot(b, int(w.ID), size)
						}
					}
				}
				lat = append(lat, time.Since(t)/2)
			}
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "t_typical-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
		})
	}
}
