package requester

import (
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// BenchmarkPostWrite64K posts a 64 KiB RDMA WRITE, builds its 16 packets
// (PMTU 4096: headers, one copy of the payload from the MR, ICRC) and
// completes it with one ACK.
func BenchmarkPostWrite64K(b *testing.B) { benchPostWrite64K(b, false) }

// BenchmarkPostWrite64KSR is BenchmarkPostWrite64K with selective repeat.
func BenchmarkPostWrite64KSR(b *testing.B) { benchPostWrite64K(b, true) }

func benchPostWrite64K(b *testing.B, sr bool) {
	const pmtu, size = 4096, 64 << 10
	mem := fakeMem{}
	mem.add(lkeyA, baseA, size, verbs.AccessLocalWrite, 1)
	cfg := baseConfig(pmtu, 0)
	cfg.SelectiveRepeat = sr
	r := New(cfg, mem, &countCQ{})
	buf := make([]byte, pmtu+maxHeaders)
	wr := &verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA, Length: size, LKey: lkeyA}}}
	ackB := ack(0)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Post(wr); err != nil {
			b.Fatal(err)
		}
		psn := r.SQPSN()
		for r.NextPacket(t0, buf) > 0 {
		}
		packet.BTH(ackB).SetPSN(psn.Add(size/pmtu - 1))
		p, _ := packet.Parse(ackB)
		r.Receive(t0, p)
	}
	if r.Outstanding() != 0 {
		b.Fatal("WRITE not completed")
	}
}

// BenchmarkReadResponse64K posts a 64 KiB RDMA READ into two SGEs, builds
// its request, and places its 16 response packets (PMTU 4096).
func BenchmarkReadResponse64K(b *testing.B) { benchReadResponse64K(b, false, false) }

// BenchmarkReadResponse64KSR is BenchmarkReadResponse64K with selective
// repeat, the responses in order.
func BenchmarkReadResponse64KSR(b *testing.B) { benchReadResponse64K(b, true, false) }

// BenchmarkReadResponse64KSRSwapped places the 16 responses of each READ
// with each pair swapped under selective repeat: out-of-order placement,
// within the reorder threshold (no re-read).
func BenchmarkReadResponse64KSRSwapped(b *testing.B) { benchReadResponse64K(b, true, true) }

func benchReadResponse64K(b *testing.B, sr, swapped bool) {
	const pmtu, size = 4096, 64 << 10
	mem := fakeMem{}
	mem.add(lkeyA, baseA, size+4096, verbs.AccessLocalWrite, 1)
	cfg := baseConfig(pmtu, 0)
	cfg.SelectiveRepeat = sr
	r := New(cfg, mem, &countCQ{})
	buf := make([]byte, pmtu+maxHeaders)
	wr := &verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA, Length: 10000, LKey: lkeyA}, {Addr: baseA + 12000, Length: size - 10000, LKey: lkeyA}}}
	rs := readResp(pmtu, 0, make([]byte, size), 0, false)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Post(wr); err != nil {
			b.Fatal(err)
		}
		psn := r.SQPSN()
		r.NextPacket(t0, buf)
		for j := range rs {
			i := j
			if swapped {
				i = j ^ 1
			}
			rb := rs[i]
			packet.BTH(rb).SetPSN(psn.Add(i))
			p, _ := packet.Parse(rb)
			r.Receive(t0, p)
		}
	}
	if r.Outstanding() != 0 {
		b.Fatal("READ not completed")
	}
}
