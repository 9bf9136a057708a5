package rxe

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPostSendInlineShape: a send WR carries its payload either in
// InlineData, with SendInline, or in SGList, without it. A WR that mixes
// the two is refused with ErrInvalidArgument on every QP type, where
// before it went out with a payload the caller did not give: SendInline
// with an SGList (libibverbs' way of asking for inline data, whose
// provider copies the SGEs' bytes at post time) sent an empty message,
// and InlineData without SendInline sent the SGList's bytes, or none.
func TestPostSendInlineShape(t *testing.T) {
	for _, typ := range []QPType{QPTypeRC, QPTypeUC, QPTypeUD} {
		for _, tc := range []struct {
			name string
			wr   func(e *end) SendWR
			says string
		}{
			{"SendInline with an SGList", func(e *end) SendWR {
				return SendWR{Opcode: WRSend, Flags: SendSignaled | SendInline, SGList: []SGE{e.mr.SGE(0, 8)}}
			}, "SGList"},
			{"SendInline with InlineData and an SGList", func(e *end) SendWR {
				return SendWR{Opcode: WRSend, Flags: SendSignaled | SendInline, InlineData: []byte("abc"), SGList: []SGE{e.mr.SGE(0, 8)}}
			}, "SGList"},
			{"InlineData without SendInline", func(e *end) SendWR {
				return SendWR{Opcode: WRSend, Flags: SendSignaled, InlineData: []byte("abc")}
			}, "InlineData"},
			{"InlineData without SendInline, with an SGList", func(e *end) SendWR {
				return SendWR{Opcode: WRSend, Flags: SendSignaled, InlineData: []byte("abc"), SGList: []SGE{e.mr.SGE(0, 8)}}
			}, "InlineData"},
		} {
			t.Run(typ.String()+"/"+tc.name, func(t *testing.T) {
				da, db, _, _ := pipeDevices(t)
				a, b := newTypedEnd(t, da, typ), newTypedEnd(t, db, typ)
				var base SendWR
				if typ == QPTypeRC {
					link(t, a, b, qpOpts{}, qpOpts{})
				} else {
					aimUnreliable(t, typ, a, b, 0x1234, &base)
				}
				wr := tc.wr(a)
				wr.AH, wr.RemoteQPN, wr.RemoteQKey = base.AH, base.RemoteQPN, base.RemoteQKey
				n, err := a.qp.PostSend(wr)
				require.ErrorIs(t, err, ErrInvalidArgument)
				require.ErrorContains(t, err, tc.says)
				require.Zero(t, n)
				noWC(t, a.cq, 0)

				// In ERR before RTS the WR is checked as well (the list
				// stops at it), not flushed.
				c := newTypedEnd(t, da, typ)
				require.NoError(t, c.qp.Modify(&QPAttr{State: QPSInit, Port: 1, QKey: 1}, initMask(typ)))
				require.NoError(t, c.qp.Modify(&QPAttr{State: QPSErr}, QPAttrState))
				wr = tc.wr(c)
				wr.AH = nil
				n, err = c.qp.PostSend(wr)
				require.ErrorIs(t, err, ErrInvalidArgument)
				require.Zero(t, n)
			})
		}
	}
}

// initMask is the mask of a RESET→INIT Modify of a QP of type typ: the
// Q_Key for UD, the access flags otherwise.
func initMask(typ QPType) QPAttrMask {
	if typ == QPTypeUD {
		return QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrQKey
	}
	return QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags
}
