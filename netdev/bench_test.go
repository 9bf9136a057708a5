package netdev

import (
	"testing"
	"time"
)

// BenchmarkUDPBatchAllocs is one WriteBatch of 64 datagrams and the
// ReadBatch calls that receive them, in one goroutine: its allocs/op are the
// allocations per 64-datagram read (writes allocate nothing).
func BenchmarkUDPBatchAllocs(b *testing.B) {
	rx := listen(b, lo4, Options{})
	tx := listen(b, lo4, Options{})
	msgs := make([]Message, 64)
	for i := range msgs {
		msgs[i] = Message{Buf: make([]byte, 1056), N: 1056, Addr: rx.LocalAddr()}
	}
	rmsgs := newMsgs(64, 2048)
	b.SetBytes(64 * 1056)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tx.WriteBatch(msgs); err != nil {
			b.Fatal(err)
		}
		for got := 0; got < 64; {
			n, err := rx.ReadBatch(rmsgs)
			if err != nil {
				b.Fatal(err)
			}
			got += n
		}
	}
}

// BenchmarkPipe measures the in-memory pipe with 1056 B datagrams, batch 64,
// a writer and a reader goroutine.
func BenchmarkPipe(b *testing.B) {
	const size = 1056
	a, p := NewPipeWith(PipeOptions{BlockWhenFull: true})
	defer a.Close()
	msgs := make([]Message, 64)
	for i := range msgs {
		msgs[i] = Message{Buf: make([]byte, size), N: size, Addr: p.LocalAddr()}
	}
	b.SetBytes(size)
	b.ReportAllocs()
	done := make(chan error, 1)
	go func() {
		rmsgs := newMsgs(64, 2048)
		for got := 0; got < b.N; {
			n, err := p.ReadBatch(rmsgs)
			if err != nil {
				done <- err
				return
			}
			got += n
		}
		done <- nil
	}()
	start := time.Now()
	for sent := 0; sent < b.N; {
		n, err := a.WriteBatch(msgs[:min(len(msgs), b.N-sent)])
		if err != nil {
			b.Fatal(err)
		}
		sent += n
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds()/1e6, "Mpps")
}
