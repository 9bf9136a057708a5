package requester

import (
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// TestSRErrorNAK sends, under selective repeat, the responder's error NAKs
// for PSNs inside an outstanding WRITE or READ, also past READ responses
// lost on the way: the NAK fails the WQE holding its PSN with the status of
// its code (as rxe check_ack maps them), completes the WRITE before it (the
// responder executed every request before the NAK's PSN), and nothing is
// asked for again. A NAK for a PSN the READ's responses already passed
// (the responder failed on a re-read's extra stream) fails the READ too.
// A NAK for no outstanding PSN is dropped.
func TestSRErrorNAK(t *testing.T) {
	const readPkts = 10
	// PSN offsets: the WRITE is 0, the READ request 1, its responses 1..10.
	for _, tc := range []struct {
		name      string
		delivered []int // READ response indexes delivered before the NAK
		nakAt     int   // PSN offset of the NAK
		code      packet.NAKCode
		want      []verbs.WCStatus // completions after Flush, in order
		failed    bool
	}{
		{name: "read-mid-after-loss", delivered: []int{0, 1, 2, 3, 5}, nakAt: 7, code: packet.NAKRemoteAccess,
			want: []verbs.WCStatus{verbs.WCSuccess, verbs.WCRemAccessErr}, failed: true},
		{name: "read-mid-in-order", delivered: []int{0, 1, 2}, nakAt: 4, code: packet.NAKRemoteAccess,
			want: []verbs.WCStatus{verbs.WCSuccess, verbs.WCRemAccessErr}, failed: true},
		{name: "read-behind-oldest", delivered: []int{0, 1, 2, 3, 4, 5}, nakAt: 3, code: packet.NAKRemoteAccess,
			want: []verbs.WCStatus{verbs.WCSuccess, verbs.WCRemAccessErr}, failed: true},
		{name: "read-first", nakAt: 1, code: packet.NAKRemoteAccess,
			want: []verbs.WCStatus{verbs.WCSuccess, verbs.WCRemAccessErr}, failed: true},
		{name: "read-invalid", delivered: []int{1}, nakAt: 3, code: packet.NAKInvalidRequest,
			want: []verbs.WCStatus{verbs.WCSuccess, verbs.WCRemInvReqErr}, failed: true},
		{name: "read-remote-op", delivered: []int{0, 2}, nakAt: 5, code: packet.NAKRemoteOperation,
			want: []verbs.WCStatus{verbs.WCSuccess, verbs.WCRemOpErr}, failed: true},
		{name: "write", nakAt: 0, code: packet.NAKRemoteAccess,
			want: []verbs.WCStatus{verbs.WCRemAccessErr, verbs.WCWRFlushErr}, failed: true},
		{name: "beyond-sent", delivered: []int{0}, nakAt: readPkts + 1, code: packet.NAKRemoteAccess,
			want: []verbs.WCStatus{verbs.WCSuccess, verbs.WCWRFlushErr}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _, _ := srSetup(t)
			h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
				SGList: []verbs.SGE{{Addr: baseA, Length: 8, LKey: lkeyA}}})
			h.post(&verbs.SendWR{ID: 2, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
				SGList: []verbs.SGE{{Addr: baseA + srSize, Length: readPkts * srPMTU, LKey: lkeyA}}})
			require.Len(t, h.drain(), 2)
			h.now = h.now.Add(100 * time.Microsecond)
			resps := readResp(srPMTU, srSQ.Add(1), make([]byte, readPkts*srPMTU), 0, false)
			for _, k := range tc.delivered {
				h.recv(resps[k])
			}
			h.recv(nak(srSQ.Add(tc.nakAt), tc.code))
			st, failed := h.r.Failed()
			require.Equal(t, tc.failed, failed, "counters %+v", h.r.Counters())
			if failed {
				failing := tc.want[1]
				if tc.want[0] != verbs.WCSuccess {
					failing = tc.want[0]
				}
				require.Equal(t, failing, st)
				// Nothing is asked for again, now or when the timers run out.
				for range 20 {
					h.now = h.now.Add(100 * time.Millisecond)
					h.r.OnTimeout(h.now)
					require.Empty(t, h.drain(), "request after the error NAK")
				}
			}
			h.r.Flush()
			got := make([]verbs.WCStatus, len(h.cq.wcs))
			for i, wc := range h.cq.wcs {
				got[i] = wc.Status
				require.Equal(t, uint64(i+1), wc.ID, "completion order")
			}
			require.Equal(t, tc.want, got)
		})
	}
}
