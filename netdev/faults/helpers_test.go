package faults_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/faults"
	"github.com/gorxe/gorxe/packet"
)

// pipePH is the ICRC pseudo-header of a datagram from the pipe's A end to
// its B end, as a gorxe socket sends it (ID 0, DF).
var pipePH = packet.PseudoHeader{
	Src: netdev.DefaultPipeAddrA.Addr(), Dst: netdev.DefaultPipeAddrB.Addr(),
	SrcPort: netdev.DefaultPipeAddrA.Port(), DstPort: netdev.DefaultPipeAddrB.Port(),
	IPFlags: packet.IPv4FlagDF,
}

// psnOf returns the PSN of a RoCE datagram's BTH.
func psnOf(b []byte) int { return int(packet.BTH(b).PSN()) }

// roce builds a RoCE packet of opcode op with PSN psn and a valid ICRC for
// pipePH. Opcodes with a payload carry 16 bytes that name the PSN.
func roce(t testing.TB, op packet.Opcode, psn int) []byte {
	t.Helper()
	h := packet.Headers{BTH: packet.BTHFields{Opcode: op, PKey: packet.DefaultPKey, DestQP: 0x17, PSN: packet.PSN(psn)}}
	var payload []byte
	if op.Info().Is(packet.MaskPayload) {
		payload = make([]byte, 16)
		binary.BigEndian.PutUint64(payload, uint64(psn))
	}
	buf := make([]byte, 256)
	n, err := packet.Build(buf, &h, payload, &pipePH)
	require.NoError(t, err)
	return buf[:n]
}

// alternating returns n packets with PSNs 0..n-1: RC_SEND_MIDDLE at even
// PSNs, RC_RDMA_READ_RESPONSE_MIDDLE at odd ones.
func alternating(t testing.TB, n int) [][]byte {
	pkts := make([][]byte, n)
	for i := range pkts {
		op := packet.RCSendMiddle
		if i%2 == 1 {
			op = packet.RCRDMAReadResponseMiddle
		}
		pkts[i] = roce(t, op, i)
	}
	return pkts
}

// mixed returns n packets of assorted opcodes with PSNs 0..n-1.
func mixed(t testing.TB, n int) [][]byte {
	ops := []packet.Opcode{packet.RCSendFirst, packet.RCSendMiddle, packet.RCSendLast,
		packet.RCRDMAReadResponseMiddle, packet.RCAcknowledge, packet.RCRDMAWriteMiddle}
	pkts := make([][]byte, n)
	for i := range pkts {
		pkts[i] = roce(t, ops[i*7%len(ops)], i)
	}
	return pkts
}

// rec is a datagram as received.
type rec struct {
	psn  int
	op   packet.Opcode
	data []byte
	at   time.Time
}

// event is one Trace call.
type event struct {
	dir    faults.Dir
	action faults.Action
	op     packet.Opcode
	psn    int
}

// tracer collects Trace calls of one direction.
type tracer struct {
	mu     sync.Mutex
	events []event
}

func (tr *tracer) hook(d faults.Dir, a faults.Action, op packet.Opcode, psn packet.PSN) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.events = append(tr.events, event{d, a, op, int(psn)})
}

func (tr *tracer) get() []event {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]event(nil), tr.events...)
}

// collector reads a Conn until it fails.
type collector struct {
	mu   sync.Mutex
	recs []rec
	err  error
	done chan struct{}
}

func collect(c netdev.Conn) *collector {
	col := &collector{done: make(chan struct{})}
	go func() {
		defer close(col.done)
		msgs := make([]netdev.Message, c.BatchSize())
		for i := range msgs {
			msgs[i].Buf = make([]byte, 2048)
		}
		for {
			n, err := c.ReadBatch(msgs)
			if err != nil {
				col.mu.Lock()
				col.err = err
				col.mu.Unlock()
				return
			}
			now := time.Now()
			col.mu.Lock()
			for _, m := range msgs[:n] {
				b := bytes.Clone(m.Buf[:m.N])
				op, psn := packet.BTH(b).Opcode(), int(packet.BTH(b).PSN())
				col.recs = append(col.recs, rec{psn: psn, op: op, data: b, at: now})
			}
			col.mu.Unlock()
		}
	}()
	return col
}

func (col *collector) get() []rec {
	col.mu.Lock()
	defer col.mu.Unlock()
	return append([]rec(nil), col.recs...)
}

func psns(recs []rec) []int {
	var out []int
	for _, r := range recs {
		out = append(out, r.psn)
	}
	return out
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// message makes a Message of p for the pipe's B end.
func message(p []byte) netdev.Message {
	return netdev.Message{Buf: p, N: len(p), Addr: netdev.DefaultPipeAddrB}
}

// send writes pkts through c in batches of the given sizes (cycled),
// sending again after local drops, as a RoCE transmitter does.
func send(t testing.TB, c netdev.Conn, pkts [][]byte, batches ...int) {
	t.Helper()
	if len(batches) == 0 {
		batches = []int{len(pkts)}
	}
	msgs := make([]netdev.Message, len(pkts))
	for i, p := range pkts {
		msgs[i] = message(p)
	}
	for k := 0; len(msgs) > 0; k++ {
		b := min(batches[k%len(batches)], len(msgs))
		n, err := c.WriteBatch(msgs[:b])
		if err != nil {
			require.ErrorIs(t, err, netdev.ErrLocalDrop)
		}
		msgs = msgs[n:]
	}
}

// transfer is the result of a run over a pipe.
type transfer struct {
	recs       []rec
	sendTrace  []event
	recvTrace  []event
	sendStats  faults.Stats
	recvStats  faults.Stats
	readErr    error
	writeStart time.Time
}

// run sends pkts from the pipe's A end, wrapped with sendCfg, to its B
// end, wrapped with recvCfg, inside the caller's synctest bubble; it lets
// a second pass so that held and delayed datagrams come out, then closes
// both. Traces are recorded whatever the configs' Trace fields.
func run(t *testing.T, pipe netdev.PipeOptions, sendCfg, recvCfg faults.Config, pkts [][]byte, batches ...int) transfer {
	t.Helper()
	a, b := netdev.NewPipeWith(pipe)
	var st, rt tracer
	sendCfg.Trace, recvCfg.Trace = st.hook, rt.hook
	fa := faults.Wrap(a, sendCfg)
	fb := faults.Wrap(b, recvCfg)
	defer fa.Close() // on failure too: the bubble must end
	defer fb.Close()
	col := collect(fb)
	start := time.Now()
	send(t, fa, pkts, batches...)
	time.Sleep(time.Second)
	synctest.Wait()
	require.NoError(t, fa.Close())
	require.NoError(t, fb.Close())
	<-col.done
	return transfer{
		recs: col.get(), sendTrace: st.get(), recvTrace: rt.get(),
		sendStats: fa.Stats(), recvStats: fb.Stats(), readErr: col.err, writeStart: start,
	}
}

// isClosed reports whether err says the Conn is closed.
func isClosed(err error) bool { return errors.Is(err, net.ErrClosed) }
