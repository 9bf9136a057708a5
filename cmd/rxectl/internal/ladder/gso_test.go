package ladder

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows"
	"github.com/gorxe/gorxe/packet"
)

// TestGSOSegmentsHaveTheirOwnNotes checks that the notes of the packets of
// one GSO datagram are told apart by segment. A capture on the sending
// host holds a GSO buffer of four SEND MIDDLE packets (PSN 100..103) as one
// frame, which rxectl dump splits into four packets with the same frame
// number and segments 1..4. The responder NAKs PSN 102 and the requester
// resends 102 and 103. Only PSN 102's first copy (segment 3 of frame 2) is
// drawn "lost after the capture point"; 100, 101 and 103 are plain
// requests. Notes used to be keyed by frame alone, so the ladder drew all
// four segments of frame 2 as lost after the capture point.
func TestGSOSegmentsHaveTheirOwnNotes(t *testing.T) {
	a := netip.MustParseAddrPort("10.0.0.1:49152")
	b := netip.MustParseAddrPort("10.0.0.2:4791")
	t0 := time.Unix(1700000000, 0)
	// seg is the packet's segment in its datagram (flows.Packet.Segment):
	// 0 for a datagram of one packet.
	mk := func(frame, seg, us int, fromB bool, op packet.Opcode, psn uint32, payload int, syn packet.Syndrome) flows.Packet {
		return rcPacket(t, t0, a, b, frame, seg, us, fromB, op, psn, payload, syn)
	}
	pkts := []flows.Packet{
		mk(1, 0, 0, false, packet.RCSendFirst, 99, 1024, 0),
		mk(2, 1, 1, false, packet.RCSendMiddle, 100, 1024, 0), // one GSO datagram: frame 2, four segments
		mk(2, 2, 1, false, packet.RCSendMiddle, 101, 1024, 0),
		mk(2, 3, 1, false, packet.RCSendMiddle, 102, 1024, 0),
		mk(2, 4, 1, false, packet.RCSendMiddle, 103, 1024, 0),
		mk(3, 0, 2, false, packet.RCSendLast, 104, 1024, 0),
		mk(4, 0, 20, true, packet.RCAcknowledge, 102, 0, packet.NAKSyndrome(packet.NAKPSNSeqError)),
		mk(5, 1, 30, false, packet.RCSendMiddle, 102, 1024, 0), // resend
		mk(5, 2, 30, false, packet.RCSendMiddle, 103, 1024, 0),
		mk(6, 0, 31, false, packet.RCSendLast, 104, 1024, 0),
		mk(7, 0, 40, true, packet.RCAcknowledge, 104, 0, packet.SyndromeACKUnlimited),
	}
	an := flows.NewAnalyzer(flows.Options{})
	for _, p := range pkts {
		an.Add(p)
	}
	rep := an.Report()
	d, err := FromCapture(pkts, rep, Selection{})
	require.NoError(t, err)
	var lostAfter []uint32
	for _, it := range d.Items {
		t.Logf("frame %d kind %d cut %v %s", it.Frame, it.Kind, it.Cut, it.Label)
		if it.Kind == Lost && it.Cut {
			lostAfter = append(lostAfter, it.PSN)
		}
	}
	require.Equal(t, []uint32{102}, lostAfter)
}
