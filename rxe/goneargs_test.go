package rxe

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGoneObjectsFailClosedWhateverTheArguments: a call on an object that
// is gone (a destroyed QP or SRQ, a deallocated PD, or any of them after
// Device.Close) fails with ErrClosed even when its arguments would be
// refused on a live object, as TestQPCallsAfterDestroyFailClosed has it
// for Modify's values and PostRecv on an SRQ's QP: the caller learns
// that the object is gone, not that an argument of a call it can no
// longer make was wrong. Each case's call is refused with
// ErrInvalidArgument on the live object first.
func TestGoneObjectsFailClosedWhateverTheArguments(t *testing.T) {
	type objs struct {
		dev *Device
		pd  *PD
		ud  *QP
		srq *SRQ
	}
	for _, tc := range []struct {
		name string
		call func(o objs) error
		end  func(t *testing.T, o objs) // makes the object gone, besides Device.Close
	}{
		{"QP.Modify/nil attributes", func(o objs) error { return o.ud.Modify(nil, QPAttrState) },
			func(t *testing.T, o objs) { require.NoError(t, o.ud.Destroy()) }},
		{"QP.SetPeerReceiveBuffer/negative", func(o objs) error { return o.ud.SetPeerReceiveBuffer(-1, 0) },
			func(t *testing.T, o objs) { require.NoError(t, o.ud.Destroy()) }},
		{"QP.AttachMcast/unicast GID", func(o objs) error { return o.ud.AttachMcast(netip.MustParseAddr("127.0.0.9"), 0) },
			func(t *testing.T, o objs) { require.NoError(t, o.ud.Destroy()) }},
		{"QP.DetachMcast/unicast GID", func(o objs) error { return o.ud.DetachMcast(netip.MustParseAddr("127.0.0.9"), 0) },
			func(t *testing.T, o objs) { require.NoError(t, o.ud.Destroy()) }},
		{"SRQ.Modify/nil attributes", func(o objs) error { return o.srq.Modify(nil, SRQAttrLimit) },
			func(t *testing.T, o objs) { require.NoError(t, o.srq.Destroy()) }},
		{"SRQ.Modify/unknown mask", func(o objs) error { return o.srq.Modify(&SRQAttr{}, 1<<7) },
			func(t *testing.T, o objs) { require.NoError(t, o.srq.Destroy()) }},
		{"PD.CreateAHFromWC/nil completion", func(o objs) error { _, err := o.pd.CreateAHFromWC(nil, nil); return err },
			func(t *testing.T, o objs) {
				require.NoError(t, o.ud.Destroy())
				require.NoError(t, o.srq.Destroy())
				require.NoError(t, o.pd.Dealloc())
			}},
	} {
		for _, how := range []string{"destroyed", "Close"} {
			t.Run(tc.name+"/"+how, func(t *testing.T) {
				d, _ := newDevices(t, "pipe")
				pd, err := d.AllocPD()
				require.NoError(t, err)
				cq, err := d.CreateCQ(4, -1)
				require.NoError(t, err)
				ud, err := pd.CreateQP(QPInitAttr{Type: QPTypeUD, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 1, MaxRecvWR: 1}})
				require.NoError(t, err)
				srq, err := pd.CreateSRQ(SRQAttr{MaxWR: 2})
				require.NoError(t, err)
				o := objs{d, pd, ud, srq}
				require.ErrorIs(t, tc.call(o), ErrInvalidArgument, "refused on the live object")
				if how == "Close" {
					require.NoError(t, d.Close())
				} else {
					tc.end(t, o)
				}
				require.ErrorIs(t, tc.call(o), ErrClosed)
			})
		}
	}
}
