package rxe

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestQPCallsAfterDestroyFailClosed uses a QP after QP.Destroy and after
// Device.Close with arguments that would be refused on a live QP too (a
// Modify with an out-of-range value, a PostRecv on a QP that takes its
// receives from an SRQ): the call fails with ErrClosed, as QP.Modify,
// QP.PostRecv and docs/api.md promise, not with an error about the
// arguments of a QP that is gone.
func TestQPCallsAfterDestroyFailClosed(t *testing.T) {
	badModify := func(qp *QP) error {
		// Port 0 is not the device's port: ErrInvalidArgument on a live QP.
		return qp.Modify(&QPAttr{State: QPSInit}, QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags)
	}
	srqPostRecv := func(qp *QP) error {
		_, err := qp.PostRecv(RecvWR{})
		return err
	}
	for _, end := range []string{"Destroy", "Close"} {
		for name, call := range map[string]func(*QP) error{"Modify": badModify, "PostRecv": srqPostRecv} {
			t.Run(end+"/"+name, func(t *testing.T) {
				d, _ := newDevices(t, "pipe")
				pd, err := d.AllocPD()
				require.NoError(t, err)
				cq, err := d.CreateCQ(16, -1)
				require.NoError(t, err)
				srq, err := pd.CreateSRQ(SRQAttr{MaxWR: 4})
				require.NoError(t, err)
				qp, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, SRQ: srq})
				require.NoError(t, err)
				require.ErrorIs(t, call(qp), ErrInvalidArgument, "a live QP refuses the arguments")
				if end == "Destroy" {
					require.NoError(t, qp.Destroy())
				} else {
					require.NoError(t, d.Close())
				}
				require.ErrorIs(t, call(qp), ErrClosed)
			})
		}
	}
}
