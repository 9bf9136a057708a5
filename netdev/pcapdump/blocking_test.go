package pcapdump_test

import (
	"bytes"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/pcapdump"
	"github.com/gorxe/gorxe/packet"
)

// waitFor polls cond every millisecond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, time.Millisecond, what)
}

// TestBlockingPeers captures both ends of a pipe whose writes wait for the
// peer to read (PipeOptions.BlockWhenFull), each end writing a batch of 3
// while the other's queue holds one datagram, and reading one datagram at
// a time: each write can finish only once the peer's reader has taken two
// of its datagrams. A reader must therefore not wait for its own Conn's
// write to finish before returning what it read, or the four goroutines
// wait for each other for ever. Every datagram arrives, and each capture
// still has the reads that returned during a write after that write's
// records.
func TestBlockingPeers(t *testing.T) {
	a, b := netdev.NewPipeWith(netdev.PipeOptions{Depth: 1, BlockWhenFull: true})
	var bufA, bufB bytes.Buffer
	pa, err := pcapdump.Wrap(a, &bufA, pcapdump.Options{})
	require.NoError(t, err)
	pb, err := pcapdump.Wrap(b, &bufB, pcapdump.Options{})
	require.NoError(t, err)
	defer pa.Close() // unblocks the goroutines on failure

	const n = 3
	errs := make(chan error, 4)
	write := func(c *pcapdump.Conn, to *netdev.PipeConn) {
		msgs := make([]netdev.Message, n)
		for i := range msgs {
			p := build(t, c.LocalAddr(), to.LocalAddr(), i, gorxeKind)
			msgs[i] = netdev.Message{Buf: p, N: len(p), Addr: to.LocalAddr()}
		}
		_, err := c.WriteBatch(msgs)
		errs <- err
	}
	read := func(c *pcapdump.Conn) {
		msgs := []netdev.Message{{Buf: make([]byte, 512)}} // one at a time
		for range n {
			if _, err := c.ReadBatch(msgs); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}
	// Each writer puts its first datagram in the peer's queue and waits
	// to put its second.
	go write(pa, b)
	waitFor(t, "a sent its first datagram", func() bool { return a.Stats().PacketsSent == 1 })
	go write(pb, a)
	waitFor(t, "b sent its first datagram", func() bool { return b.Stats().PacketsSent == 1 })
	go read(pa)
	go read(pb)
	deadline := time.After(10 * time.Second)
	for range 4 {
		select {
		case err := <-errs:
			require.NoError(t, err)
		case <-deadline:
			t.Fatalf("deadlock: a sent %d and received %d, b sent %d and received %d of %d each",
				a.Stats().PacketsSent, a.Stats().PacketsReceived, b.Stats().PacketsSent, b.Stats().PacketsReceived, n)
		}
	}
	require.NoError(t, pa.Close())
	require.NoError(t, pb.Close())
	for _, c := range []struct {
		conn *pcapdump.Conn
		buf  *bytes.Buffer
	}{{pa, &bufA}, {pb, &bufB}} {
		require.Equal(t, pcapdump.Stats{Sent: n, Received: n}, c.conn.Stats())
		recs := decode(t, c.buf.Bytes())
		require.Len(t, recs, 2*n)
		for i, r := range recs {
			require.Equal(t, i < n, r.sent, "record %d: the write's records first", i)
			require.Equal(t, i%n, r.psn, "record %d", i)
		}
	}
}

// sized builds a RoCE SEND_ONLY packet of size bytes (with a valid ICRC)
// with PSN psn from src to dst.
func sized(t *testing.T, src, dst netip.AddrPort, psn, size int) []byte {
	t.Helper()
	ph := packet.PseudoHeader{Src: src.Addr(), Dst: dst.Addr(), SrcPort: src.Port(), DstPort: dst.Port(), IPFlags: packet.IPv4FlagDF}
	h := packet.Headers{BTH: packet.BTHFields{Opcode: packet.RCSendOnly, PKey: packet.DefaultPKey, DestQP: 0x33, PSN: packet.PSN(psn)}}
	buf := make([]byte, size)
	n, err := packet.Build(buf, &h, make([]byte, size-packet.BTHSize-packet.ICRCSize), &ph)
	require.NoError(t, err)
	require.Equal(t, size, n)
	return buf
}

// TestHeldReadsBounded reads more than a megabyte (300 datagrams of 4000
// bytes) while a write waits for the peer: the reads held for the write
// stop at a bound, and those past it are recorded at once, the held ones
// first, so that nothing is lost and the held copies do not grow without
// bound.
func TestHeldReadsBounded(t *testing.T) {
	const count, size = 300, 4000
	a, b := netdev.NewPipeWith(netdev.PipeOptions{Depth: count, BlockWhenFull: true})
	var buf bytes.Buffer
	pa, err := pcapdump.Wrap(a, &buf, pcapdump.Options{})
	require.NoError(t, err)
	defer pa.Close()
	guard := time.AfterFunc(10*time.Second, func() { pa.Close() }) // a read that waits for the write fails
	defer guard.Stop()

	// Fill b's queue but one, then write two from pa: the second waits,
	// as nobody reads b yet.
	out := make([]netdev.Message, count+1)
	for i := range out {
		p := build(t, a.LocalAddr(), b.LocalAddr(), i, gorxeKind)
		out[i] = netdev.Message{Buf: p, N: len(p), Addr: b.LocalAddr()}
	}
	n, err := a.WriteBatch(out[:count-1])
	require.NoError(t, err)
	require.Equal(t, count-1, n)
	wrote := make(chan error, 1)
	go func() { _, err := pa.WriteBatch(out[count-1:]); wrote <- err }()
	waitFor(t, "the write waits", func() bool { return a.Stats().PacketsSent == count })

	// b sends count datagrams of size bytes; pa reads them during the write.
	in := make([]netdev.Message, count)
	for i := range in {
		p := sized(t, b.LocalAddr(), a.LocalAddr(), i, size)
		in[i] = netdev.Message{Buf: p, N: size, Addr: a.LocalAddr()}
	}
	n, err = b.WriteBatch(in)
	require.NoError(t, err)
	require.Equal(t, count, n)
	msgs := make([]netdev.Message, 16)
	for i := range msgs {
		msgs[i].Buf = make([]byte, 2*size)
	}
	for got := 0; got < count; {
		n, err := pa.ReadBatch(msgs)
		require.NoError(t, err)
		got += n
	}
	select {
	case err := <-wrote:
		t.Fatalf("the write did not wait: %v", err)
	default:
	}
	st := pa.Stats()
	require.Positive(t, st.Received, "reads past the bound are recorded during the write")
	require.Less(t, st.Received, uint64(count), "reads within the bound are held")

	// Let the write finish: the reads still held are recorded after it.
	go func() {
		msgs := make([]netdev.Message, 64)
		for i := range msgs {
			msgs[i].Buf = make([]byte, 512)
		}
		for {
			if _, err := b.ReadBatch(msgs); err != nil {
				return
			}
		}
	}()
	select {
	case err := <-wrote:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the write did not finish")
	}
	require.NoError(t, pa.Close())
	require.Equal(t, pcapdump.Stats{Sent: 2, Received: count}, pa.Stats())
	recs := decode(t, buf.Bytes())
	require.Len(t, recs, count+2)
	var psns, sentAt []int
	for i, r := range recs {
		if r.sent {
			sentAt = append(sentAt, i)
			continue
		}
		psns = append(psns, r.psn)
	}
	for i, p := range psns {
		require.Equal(t, i, p, "the reads in the order read")
	}
	require.Len(t, sentAt, 2)
	require.Equal(t, sentAt[0]+1, sentAt[1], "the write's records together")
	require.Positive(t, sentAt[0], "after the reads recorded past the bound")
	require.Less(t, sentAt[1], count+1, "before the reads still held")
}

// TestStampsOfAWriteAndAReadDuringIt: a sent datagram's record is stamped
// when its write began, and a datagram read while that write was still in
// progress keeps the time it was read, though it is recorded after the
// write's records; so the round trip a capture shows is not cut to zero.
// The write waits 20 ms (on the bubble's clock) for the peer to read; the
// answer is read 10 ms into it.
func TestStampsOfAWriteAndAReadDuringIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := netdev.NewPipeWith(netdev.PipeOptions{Depth: 1, BlockWhenFull: true})
		var buf bytes.Buffer
		pa, err := pcapdump.Wrap(a, &buf, pcapdump.Options{})
		require.NoError(t, err)
		msg := func(from, to netdev.Conn, psn int) []netdev.Message {
			p := build(t, from.LocalAddr(), to.LocalAddr(), psn, gorxeKind)
			return []netdev.Message{{Buf: p, N: len(p), Addr: to.LocalAddr()}}
		}
		_, err = a.WriteBatch(msg(a, b, 0)) // b's queue is full
		require.NoError(t, err)
		start := time.Now()
		wrote := make(chan error, 1)
		go func() { _, err := pa.WriteBatch(msg(a, b, 1)); wrote <- err }()
		synctest.Wait() // the write waits for b to read

		time.Sleep(10 * time.Millisecond)
		_, err = b.WriteBatch(msg(b, a, 2))
		require.NoError(t, err)
		in := []netdev.Message{{Buf: make([]byte, 512)}}
		n, err := pa.ReadBatch(in)
		require.NoError(t, err)
		require.Equal(t, 1, n)

		time.Sleep(10 * time.Millisecond)
		out := make([]netdev.Message, 2)
		for i := range out {
			out[i].Buf = make([]byte, 512)
		}
		for got := 0; got < 2; {
			n, err := b.ReadBatch(out)
			require.NoError(t, err)
			got += n
		}
		require.NoError(t, <-wrote)
		require.NoError(t, pa.Close())

		recs := decode(t, buf.Bytes())
		require.Len(t, recs, 2)
		require.True(t, recs[0].sent, "the write's record first")
		require.Equal(t, 1, recs[0].psn)
		require.True(t, start.Equal(recs[0].at), "stamped when the write began: %v, not %v", recs[0].at, start)
		require.False(t, recs[1].sent)
		require.True(t, start.Add(10*time.Millisecond).Equal(recs[1].at), "stamped when it was read (+10ms), not when the write returned: %v after the write began", recs[1].at.Sub(start))
	})
}
