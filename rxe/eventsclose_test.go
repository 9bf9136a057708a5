package rxe

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/testutil"
)

// TestEventsClosedByClose: Device.Close closes Events once it has stopped
// every QP, so a receiver ranging over it ends; it first gets the events
// raised before Close (SQ_DRAINED here) and those of Close's own flushes
// (QP_LAST_WQE_REACHED of a QP on an SRQ). A second Close returns with the
// channel closed too.
func TestEventsClosedByClose(t *testing.T) {
	for _, second := range []bool{false, true} {
		name := map[bool]string{false: "one-close", true: "second-close"}[second]
		t.Run(name, func(t *testing.T) {
			da, db := newDevices(t, "pipe")
			srq, err := func() (*SRQ, error) {
				pd, err := da.AllocPD()
				require.NoError(t, err)
				return pd.CreateSRQ(SRQAttr{MaxWR: 4, MaxSGE: 1})
			}()
			require.NoError(t, err)
			a := smallEnd(t, da, srq.pd, qpOpts{srq: srq})
			b := smallEnd(t, db, nil, qpOpts{})
			link(t, a, b, qpOpts{}, qpOpts{})
			require.NoError(t, a.qp.Modify(&QPAttr{State: QPSSQD, SQDrainNotify: true}, QPAttrState|QPAttrEnSQDAsyncNotify))
			require.Eventually(t, func() bool { return len(da.events) > 0 }, testutil.Bound(), time.Millisecond,
				"no SQ_DRAINED before Close")

			got := make(chan []AsyncEventType, 1)
			go func() {
				var types []AsyncEventType
				for e := range da.Events() {
					types = append(types, e.Type)
				}
				got <- types
			}()
			require.NoError(t, da.Close())
			if second {
				require.ErrorIs(t, da.Close(), ErrClosed)
			}
			select {
			case types := <-got:
				require.Equal(t, []AsyncEventType{EventSQDrained, EventQPLastWQEReached}, types)
			case <-time.After(testutil.Bound()):
				t.Fatal("ranging over Events did not end after Close")
			}
			_, ok := <-da.Events()
			require.False(t, ok, "Events after Close")
		})
	}
}

// TestEventsRaiseRacesClose: events raised while Close closes the channel
// (and after) are delivered or dropped and counted, never sent on the
// closed channel (which would panic).
func TestEventsRaiseRacesClose(t *testing.T) {
	da, _ := newDevices(t, "pipe")
	cq, err := da.CreateCQ(4, -1)
	require.NoError(t, err)
	var wg sync.WaitGroup
	const raisers, each = 4, 500
	for range raisers {
		wg.Go(func() {
			for range each {
				da.raise(AsyncEvent{Type: EventCQErr, CQ: cq})
			}
		})
	}
	received := make(chan int, 1)
	go func() {
		n := 0
		for range da.Events() {
			n++
		}
		received <- n
	}()
	require.NoError(t, da.Close())
	wg.Wait()
	select {
	case n := <-received:
		require.Equal(t, uint64(raisers*each), uint64(n)+da.Counters().EventsDropped,
			"every event is received or counted as dropped")
	case <-time.After(testutil.Bound()):
		t.Fatal("ranging over Events did not end after Close")
	}
}
