package rxe

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPostSendInErrBeforeRTS: a QP moved to ERR before RTS still
// validates each work request of a post list as rxe_post_send does in ERR
// (post_one_send → validate_send_wr, init_send_wr): the WRs before a bad
// one are posted and flushed with WR_FLUSH_ERR, the bad one is refused
// (bad_wr, EINVAL) and those after it are neither posted nor completed.
func TestPostSendInErrBeforeRTS(t *testing.T) {
	d, _ := newDevices(t, "pipe")
	good := func(e *end, ah *AddrHandle, id uint64) SendWR {
		wr := SendWR{ID: id, Opcode: WRSend, SGList: []SGE{e.mr.SGE(0, 8)}}
		if ah != nil {
			wr.AH, wr.RemoteQPN, wr.RemoteQKey = ah, 2, 1
		}
		return wr
	}
	for _, tc := range []struct {
		name string
		typ  QPType
		bad  func(e *end) SendWR
	}{
		{"too many SGEs", QPTypeRC, func(e *end) SendWR {
			return SendWR{ID: 2, Opcode: WRSend, SGList: make([]SGE, 5)}
		}},
		{"inline beyond max_inline_data", QPTypeRC, func(e *end) SendWR {
			return SendWR{ID: 2, Opcode: WRSend, Flags: SendInline, InlineData: make([]byte, 65)}
		}},
		{"misaligned atomic", QPTypeRC, func(e *end) SendWR {
			return SendWR{ID: 2, Opcode: WRAtomicFetchAndAdd, SGList: []SGE{e.mr.SGE(0, 8)}, RemoteAddr: 4}
		}},
		{"unsupported opcode", QPTypeRC, func(e *end) SendWR {
			return SendWR{ID: 2, Opcode: WRBindMW}
		}},
		{"READ on UD", QPTypeUD, func(e *end) SendWR {
			return SendWR{ID: 2, Opcode: WRRDMARead, SGList: []SGE{e.mr.SGE(0, 8)}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := smallEnd(t, d, nil, qpOpts{})
			var ah *AddrHandle
			if tc.typ != QPTypeRC {
				var err error
				ah, err = e.pd.CreateAH(AH{DGID: d.GID()})
				require.NoError(t, err)
				qp, err := e.pd.CreateQP(QPInitAttr{Type: tc.typ, SendCQ: e.cq, RecvCQ: e.cq,
					Cap: QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 64}})
				require.NoError(t, err)
				e.qp = qp
			}
			init, mask := QPAttr{State: QPSInit, Port: 1}, QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags
			if tc.typ == QPTypeUD {
				mask = QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrQKey
			}
			require.NoError(t, e.qp.Modify(&init, mask))
			require.NoError(t, e.qp.Modify(&QPAttr{State: QPSErr}, QPAttrState))
			n, err := e.qp.PostSend(good(e, ah, 1), tc.bad(e), good(e, ah, 3))
			require.ErrorIs(t, err, ErrInvalidArgument)
			require.Equal(t, 1, n, "bad_wr is the second WR")
			require.Equal(t, []wcBrief{{1, WCWRFlushErr, WCSend}}, briefs(waitWCs(t, e.cq, 1)))
			noWC(t, e.cq, 20*time.Millisecond)
		})
	}
}
