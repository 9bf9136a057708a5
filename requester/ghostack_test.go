package requester

import (
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// A response naming a PSN never sent answers nothing (a ghost, e.g. from
// an earlier incarnation of the QP): it is dropped, and the message in
// progress goes on with its own PSNs (IBA 9.7.1: the packets of a message
// take consecutive PSNs).
func TestResponseForUnsentPSNIgnored(t *testing.T) {
	const pmtu = 1024
	for _, tc := range []struct {
		name  string
		ghost []byte
	}{
		{"ack-of-the-last-psn", ack(2)},
		{"ack-past-the-message", ack(5)},
		{"sequence-nak", nak(2, packet.NAKPSNSeqError)},
		{"rnr-nak", rnr(2, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, baseConfig(pmtu, 0))
			h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
			h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: []verbs.SGE{{Addr: baseA, Length: 3 * pmtu, LKey: lkeyA}}})
			require.Equal(t, packet.PSN(0), parse(t, h.next()).PSN())
			h.recv(tc.ghost)
			require.Equal(t, uint64(1), h.r.Counters().ResponsesDropped)
			require.Empty(t, h.cq.wcs)
			rest := h.drain()
			require.Len(t, rest, 2)
			for i, b := range rest {
				p := parse(t, b)
				require.Equal(t, packet.PSN(1+i), p.PSN())
				require.Equal(t, wantOpcodes(verbs.WRSend, 3)[1+i], p.Opcode())
			}
			h.recv(ack(2))
			require.Equal(t, []uint64{1}, h.cq.ids())
			require.Equal(t, verbs.WCSuccess, h.cq.wcs[0].Status)
		})
	}
}
