package rxe

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/testutil"
)

// TestCompChannelGetEndsOnClose: CompChannel.Get (ibv_get_cq_event) blocks
// until a notification, ctx's end or the close of the device of the
// channel's CQs. A Get blocked at Device.Close first returns the
// notification of Close's flush completion (a CQ armed before it), then
// ErrClosed; so does a Get that began before the channel had a CQ.
func TestCompChannelGetEndsOnClose(t *testing.T) {
	for _, early := range []bool{false, true} {
		name := map[bool]string{false: "get-after-create", true: "get-before-create"}[early]
		t.Run(name, func(t *testing.T) {
			da, db := newDevices(t, "pipe")
			ch := NewCompChannel(4)
			type result struct {
				cq  *CQ
				err error
			}
			results := make(chan result, 4)
			getter := func() {
				for {
					cq, err := ch.Get(context.Background())
					results <- result{cq, err}
					if err != nil {
						return
					}
				}
			}
			if early {
				go getter()
			}
			cq, err := da.CreateCQWith(CQAttr{CQE: 64, Vector: -1, Channel: ch})
			require.NoError(t, err)
			a := smallEnd(t, da, nil, qpOpts{cq: cq})
			b := smallEnd(t, db, nil, qpOpts{})
			link(t, a, b, qpOpts{}, qpOpts{})
			_, err = a.qp.PostRecv(RecvWR{ID: 1, SGList: []SGE{a.mr.SGE(0, 64)}})
			require.NoError(t, err)
			require.NoError(t, cq.ReqNotify(false))
			if !early {
				go getter()
			}

			require.NoError(t, da.Close())
			for i, want := range []result{{cq, nil}, {nil, ErrClosed}} {
				select {
				case got := <-results:
					require.Same(t, want.cq, got.cq, "Get %d", i)
					require.ErrorIs(t, got.err, want.err, "Get %d", i)
				case <-time.After(testutil.Bound()):
					t.Fatalf("Get %d did not return after Close", i)
				}
			}
			_, err = ch.Get(context.Background())
			require.ErrorIs(t, err, ErrClosed, "Get on a drained channel of a closed device")
		})
	}
}

// TestCompChannelGetContext: Get returns ctx's error when ctx ends first,
// and a pending notification at once.
func TestCompChannelGetContext(t *testing.T) {
	da, _ := newDevices(t, "pipe")
	ch := NewCompChannel(4)
	cq, err := da.CreateCQWith(CQAttr{CQE: 4, Vector: -1, Channel: ch})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = ch.Get(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, cq.ReqNotify(false))
	cq.push(&WC{ID: 1}, false)
	got, err := ch.Get(context.Background())
	require.NoError(t, err)
	require.Same(t, cq, got)
}

// TestCompChannelOneDevice: a completion channel serves the CQs of one
// device, as an ibv_comp_channel belongs to one context: a CQ of another
// device is refused with it.
func TestCompChannelOneDevice(t *testing.T) {
	da, db := newDevices(t, "pipe")
	ch := NewCompChannel(4)
	_, err := da.CreateCQWith(CQAttr{CQE: 4, Vector: -1, Channel: ch})
	require.NoError(t, err)
	_, err = da.CreateCQWith(CQAttr{CQE: 4, Vector: -1, Channel: ch})
	require.NoError(t, err, "a second CQ of the same device")
	_, err = db.CreateCQWith(CQAttr{CQE: 4, Vector: -1, Channel: ch})
	require.ErrorIs(t, err, ErrInvalidArgument)
}
