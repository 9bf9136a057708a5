package faults_test

import (
	"bytes"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/faults"
	"github.com/stretchr/testify/require"
)

// Receive rules that only drop or corrupt are applied in the reader's
// buffers, without the pump: every datagram not dropped arrives once, in
// order, the seeded decisions do not depend on how the datagrams were
// batched, and the statistics and the trace count what happened.
func TestReceiveDropCorruptDirect(t *testing.T) {
	const n = 2000
	pkts := mixed(t, n)
	cfg := faults.Config{Seed: 7, Rules: mustRules(t, "drop=0.1,dir=recv", "corrupt=0.05,dir=recv", "drop=RC_ACKNOWLEDGE#3-5,dir=recv")}
	runBatches := func(batches ...int) transfer {
		var tr transfer
		synctest.Test(t, func(t *testing.T) {
			tr = run(t, netdev.PipeOptions{Depth: 4 * n}, faults.Config{}, cfg, pkts, batches...)
		})
		return tr
	}
	first := runBatches(1)
	again := runBatches(64, 7, 1000)
	for _, tr := range []transfer{first, again} {
		require.NoError(t, nonClosed(tr.readErr))
		st := tr.recvStats.Recv
		require.NotZero(t, st.Dropped)
		require.NotZero(t, st.Corrupted)
		require.Zero(t, st.Lost)
		require.Len(t, tr.recs, n-int(st.Dropped), "every datagram not dropped arrives")
		got := psns(tr.recs)
		for i := 1; i < len(got); i++ {
			require.Less(t, got[i-1], got[i], "in order, once")
		}
	}
	require.Equal(t, first.recvTrace, again.recvTrace)
	require.Equal(t, first.recvStats, again.recvStats)
	for i := range first.recs {
		require.Equal(t, first.recs[i].data, again.recs[i].data, "datagram %d", i)
	}
}

// nonClosed drops the error a closed Conn's reader ends with.
func nonClosed(err error) error {
	if isClosed(err) {
		return nil
	}
	return err
}

// pumps returns the number of receive pump goroutines of this process:
// those that faults.Wrap created (its only goroutine, recvSide.pump), from
// the stacks of all goroutines, whether they have started or not.
// Counting goroutines with runtime.NumGoroutine also counted those of
// earlier tests that were still exiting, and once came out at -1.
func pumps() int {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return bytes.Count(buf[:n], []byte("created by github.com/gorxe/gorxe/netdev/faults.Wrap "))
		}
		buf = make([]byte, 2*len(buf))
	}
}

// Only rules that hold, delay or duplicate datagrams need the pump
// goroutine, and only if they can fire.
func TestReceivePumpOnlyWhenNeeded(t *testing.T) {
	for _, tc := range []struct {
		rule string
		pump bool
	}{
		{"drop=0.1,dir=recv", false},
		{"corrupt=0.1,dir=recv", false},
		{"dup=0.1,dir=recv", true},
		{"reorder=0.1,dir=recv", true},
		{"delay=0.1,dir=recv", true},
		// Rules that can never fire are left out: the direction passes
		// through.
		{"delay=0,dir=recv", false},
		{"reorder=0", false},
	} {
		require.Eventually(t, func() bool { return pumps() == 0 }, 10*time.Second, time.Millisecond,
			"the pumps of earlier tests end")
		synctest.Test(t, func(t *testing.T) {
			a, b := netdev.NewPipe()
			fb := faults.Wrap(b, faults.Config{Seed: 1, Rules: mustRules(t, tc.rule)})
			started := pumps()
			require.NoError(t, fb.Close())
			require.NoError(t, a.Close())
			synctest.Wait()
			if tc.pump {
				require.Equal(t, 1, started, tc.rule)
			} else {
				require.Zero(t, started, tc.rule)
			}
		})
	}
}

// batchCounter counts the WriteBatch calls that reach the Conn it wraps.
type batchCounter struct {
	netdev.Conn
	calls int
}

func (b *batchCounter) WriteBatch(msgs []netdev.Message) (int, error) {
	b.calls++
	return b.Conn.WriteBatch(msgs)
}

// A send batch with drops in it reaches the inner Conn as one batch: a
// drop has no side effect to order against a refusal. Other faults still
// end the batch before them.
func TestSendDropsKeepTheBatch(t *testing.T) {
	for _, tc := range []struct {
		rule    string
		batches int
	}{
		{"drop=0.2,dir=send", 1},
		{"corrupt=0.2,dir=send", 2}, // at least: one per corruption and the rest
	} {
		synctest.Test(t, func(t *testing.T) {
			a, b := netdev.NewPipeWith(netdev.PipeOptions{Depth: 256})
			inner := &batchCounter{Conn: a}
			fa := faults.Wrap(inner, faults.Config{Seed: 3, Rules: mustRules(t, tc.rule)})
			pkts := mixed(t, 32)
			msgs := make([]netdev.Message, len(pkts))
			for i, p := range pkts {
				msgs[i] = message(p)
			}
			n, err := fa.WriteBatch(msgs)
			require.NoError(t, err)
			require.Equal(t, len(pkts), n)
			st := fa.Stats().Send
			if tc.batches == 1 {
				require.NotZero(t, st.Dropped)
				require.Equal(t, 1, inner.calls, tc.rule)
			} else {
				require.NotZero(t, st.Corrupted)
				require.GreaterOrEqual(t, inner.calls, tc.batches, tc.rule)
			}
			require.NoError(t, fa.Close())
			require.NoError(t, b.Close())
		})
	}
}

// tosRecorder records the traffic class of every Message that reaches
// the Conn it wraps.
type tosRecorder struct {
	netdev.Conn
	tos []uint8
}

func (r *tosRecorder) WriteBatch(msgs []netdev.Message) (int, error) {
	for _, m := range msgs {
		r.tos = append(r.tos, m.TOS)
	}
	return r.Conn.WriteBatch(msgs)
}

// A datagram the fault injector sends late, twice or corrupted keeps its
// Message.TOS.
func TestFaultsKeepTOS(t *testing.T) {
	for _, rule := range []string{"dup=0.5,dir=send", "corrupt=0.5,dir=send", "reorder=0.5,by=2,dir=send", "delay=0.5,by=1ms,dir=send"} {
		synctest.Test(t, func(t *testing.T) {
			a, b := netdev.NewPipeWith(netdev.PipeOptions{Depth: 256})
			inner := &tosRecorder{Conn: a}
			fa := faults.Wrap(inner, faults.Config{Seed: 5, Rules: mustRules(t, rule)})
			pkts := mixed(t, 32)
			msgs := make([]netdev.Message, len(pkts))
			for i, p := range pkts {
				msgs[i] = message(p)
				msgs[i].TOS = 0x68
			}
			_, err := fa.WriteBatch(msgs)
			require.NoError(t, err)
			time.Sleep(10 * time.Millisecond) // held and delayed datagrams go out
			synctest.Wait()
			require.NotEmpty(t, inner.tos)
			for i, tos := range inner.tos {
				require.Equal(t, uint8(0x68), tos, "%s: datagram %d", rule, i)
			}
			require.NoError(t, fa.Close())
			require.NoError(t, b.Close())
		})
	}
}
