package faults_test

import (
	"errors"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/faults"
	"github.com/gorxe/gorxe/packet"
)

// recvModes are receive rules that read in the caller's buffers (drop,
// corrupt) and rules that need the pump (dup), none of which fires on the
// datagrams of these tests unless they say so.
var recvModes = []string{"drop=#1000,dir=recv", "dup=#1000,dir=recv"}

func buffers(n, size int) []netdev.Message {
	msgs := make([]netdev.Message, n)
	for i := range msgs {
		msgs[i].Buf = make([]byte, size)
	}
	return msgs
}

func writeTo(t *testing.T, c netdev.Conn, pkts ...[]byte) {
	t.Helper()
	msgs := make([]netdev.Message, len(pkts))
	for i, p := range pkts {
		msgs[i] = netdev.Message{Buf: p, N: len(p), Addr: netdev.DefaultPipeAddrB}
	}
	n, err := c.WriteBatch(msgs)
	require.NoError(t, err)
	require.Equal(t, len(pkts), n)
}

// TestReadEmptyBatch: ReadBatch with no Messages returns 0 and no error at
// once (netdev.Conn), whatever the rules.
func TestReadEmptyBatch(t *testing.T) {
	for _, rule := range recvModes {
		_, b := netdev.NewPipe()
		fb := faults.Wrap(b, faults.Config{Rules: mustRules(t, rule)})
		done := make(chan error, 1)
		go func() {
			n, err := fb.ReadBatch(nil)
			if err == nil && n != 0 {
				err = errors.New("n != 0")
			}
			done <- err
		}()
		select {
		case err := <-done:
			require.NoError(t, err, rule)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: ReadBatch(nil) did not return", rule)
		}
		require.NoError(t, fb.Close())
	}
}

// TestReadAfterClose: once the Conn is closed ReadBatch fails with an
// error wrapping net.ErrClosed, even with datagrams read from the inner
// Conn and not yet returned (Close discards them).
func TestReadAfterClose(t *testing.T) {
	for _, rule := range recvModes {
		synctest.Test(t, func(t *testing.T) {
			a, b := netdev.NewPipe()
			fb := faults.Wrap(b, faults.Config{Rules: mustRules(t, rule)})
			writeTo(t, a, roce(t, packet.RCSendOnly, 0), roce(t, packet.RCSendOnly, 1))
			synctest.Wait()
			require.NoError(t, fb.Close())
			n, err := fb.ReadBatch(buffers(4, 256))
			require.True(t, isClosed(err), "%s: %v", rule, err)
			require.Zero(t, n)
		})
	}
}

// TestReadWaitsPastDrops: a ReadBatch whose datagrams are all dropped
// waits for more; it never returns 0 datagrams without an error
// (netdev.Conn).
func TestReadWaitsPastDrops(t *testing.T) {
	for _, rule := range []string{"drop=#1", "drop=#1,op=RC_SEND_ONLY|RC_SEND_LAST"} {
		synctest.Test(t, func(t *testing.T) {
			a, b := netdev.NewPipe()
			fb := faults.Wrap(b, faults.Config{Rules: mustRules(t, rule+",dir=recv")})
			defer fb.Close()
			writeTo(t, a, roce(t, packet.RCSendOnly, 0))
			type result struct {
				n   int
				err error
				psn int
			}
			done := make(chan result, 1)
			go func() {
				msgs := buffers(4, 256)
				n, err := fb.ReadBatch(msgs)
				r := result{n: n, err: err}
				if n > 0 {
					r.psn = int(packet.BTH(msgs[0].Buf[:msgs[0].N]).PSN())
				}
				done <- r
			}()
			synctest.Wait()
			select {
			case r := <-done:
				t.Fatalf("%s: ReadBatch returned %+v for a batch it dropped", rule, r)
			default:
			}
			writeTo(t, a, roce(t, packet.RCSendOnly, 1))
			r := <-done
			require.NoError(t, r.err)
			require.Equal(t, 1, r.n)
			require.Equal(t, 1, r.psn)
		})
	}
}

// TestReadBatchLimits: with the pump, ReadBatch returns at most
// BatchSize datagrams (netdev.Conn); a datagram longer than the caller's
// buffer is dropped and counted lost, not cut short; and the pump reads
// no further ahead of the reader than MaxQueue and one batch, then waits
// for the reader to make room.
func TestReadBatchLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const total, batch, maxQueue = 200, 4, 8
		a, b := netdev.NewPipeWith(netdev.PipeOptions{BatchSize: batch, Depth: total})
		fb := faults.Wrap(b, faults.Config{MaxQueue: maxQueue, Rules: mustRules(t, "dup=#1000,dir=recv")})
		defer fb.Close()
		long := make([]byte, 200)
		copy(long, roce(t, packet.RCSendOnly, 0))
		pkts := [][]byte{long}
		for psn := 1; psn < total; psn++ {
			pkts = append(pkts, roce(t, packet.RCSendOnly, psn))
		}
		writeTo(t, a, pkts...)
		synctest.Wait()
		read := b.Stats().PacketsReceived
		require.LessOrEqual(t, read, uint64(maxQueue+batch), "the pump stops at MaxQueue")

		msgs := buffers(16, 100)
		var got []int
		for len(got) < total-1 {
			n, err := fb.ReadBatch(msgs)
			require.NoError(t, err)
			require.LessOrEqual(t, n, batch)
			for _, m := range msgs[:n] {
				got = append(got, int(packet.BTH(m.Buf[:m.N]).PSN()))
			}
		}
		require.Equal(t, seq(total)[1:], got, "the long datagram is dropped")
		require.Equal(t, uint64(1), fb.Stats().Recv.Lost)
	})
}

// flaky is a feeder whose first ReadBatch fails with err.
type flaky struct {
	*feeder
	err error
}

func (f *flaky) ReadBatch(msgs []netdev.Message) (int, error) {
	if err := f.err; err != nil {
		f.err = nil
		return 0, err
	}
	return f.feeder.ReadBatch(msgs)
}

// TestReadPassesErrors: an error of the inner Conn that does not close it
// is returned by one ReadBatch, and reading goes on after it; one that
// closes it is returned by every later ReadBatch.
func TestReadPassesErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := []netdev.Message{message(roce(t, packet.RCSendOnly, 0)), message(roce(t, packet.RCSendOnly, 1))}
		refused := syscall.ECONNREFUSED
		fb := faults.Wrap(&flaky{feeder: newFeeder(in, false), err: refused},
			faults.Config{Rules: mustRules(t, "dup=#2,dir=recv")})
		defer fb.Close()
		msgs := buffers(4, 256)
		_, err := fb.ReadBatch(msgs)
		require.ErrorIs(t, err, refused)
		var got []int
		for {
			n, err := fb.ReadBatch(msgs)
			if err != nil {
				require.True(t, isClosed(err), "%v", err)
				break
			}
			for _, m := range msgs[:n] {
				got = append(got, int(packet.BTH(m.Buf[:m.N]).PSN()))
			}
		}
		require.Equal(t, []int{0, 1, 1}, got)
		_, err = fb.ReadBatch(msgs)
		require.True(t, isClosed(err), "again: %v", err)
	})
}

// TestReceiveDueBeforeLater: a delayed datagram that fell due before a
// later one arrived is delivered before it, though the reader comes only
// after both.
func TestReceiveDueBeforeLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := netdev.NewPipe()
		fb := faults.Wrap(b, faults.Config{Rules: mustRules(t, "delay=#1,by=1ms,dir=recv")})
		defer fb.Close()
		writeTo(t, a, roce(t, packet.RCSendOnly, 0))
		time.Sleep(2 * time.Millisecond)
		writeTo(t, a, roce(t, packet.RCSendOnly, 1))
		synctest.Wait()
		time.Sleep(3 * time.Millisecond)
		msgs := buffers(4, 256)
		var got []int
		for len(got) < 2 {
			n, err := fb.ReadBatch(msgs)
			require.NoError(t, err)
			for _, m := range msgs[:n] {
				got = append(got, int(packet.BTH(m.Buf[:m.N]).PSN()))
			}
		}
		require.Equal(t, []int{0, 1}, got)
	})
}
