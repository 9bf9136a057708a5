package ladder

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows/flowstest"
	"github.com/gorxe/gorxe/packet"
)

// TestCNPIsNotARequest: a RoCEv2 CNP (opcode 0x81, IBA A17.9.2) is a
// congestion notification, neither a request nor a response, and its PSN
// is reserved: the ladder draws it as a CNP, labelled without a PSN, and
// the legend names it so. Both in an RC connection and in the ConnectX-4
// Lx CNP of the real capture.
func TestCNPIsNotARequest(t *testing.T) {
	a := netip.MustParseAddrPort("10.0.0.1:49152")
	b := netip.MustParseAddrPort("10.0.0.2:4791")
	t0 := time.Unix(1700000000, 0)
	mk := func(frame, us int, fromB bool, op packet.Opcode, psn uint32, payload int, syn packet.Syndrome) flows.Packet {
		return rcPacket(t, t0, a, b, frame, 0, us, fromB, op, psn, payload, syn)
	}
	rc := []flows.Packet{
		mk(1, 0, false, packet.RCSendFirst, 99, 1024, 0),
		mk(2, 1, false, packet.RCSendMiddle, 100, 1024, 0),
		mk(3, 2, true, packet.CNP, 0, 0, 0),
		mk(4, 3, false, packet.RCSendLast, 101, 1024, 0),
		mk(5, 40, true, packet.RCAcknowledge, 101, 0, packet.SyndromeACKUnlimited),
	}
	captured, err := flowstest.ReadPcap("../../../../testdata/captures/scapy_uts_cx4lx_cnp_and_uc_example.pcap")
	require.NoError(t, err)
	tests := []struct {
		name  string
		pkts  []flows.Packet
		sel   Selection
		frame int // the CNP's
		dir   Dir
	}{
		{"in an RC connection", rc, Selection{}, 3, ToLeft},
		{"ConnectX-4 Lx capture", captured, Selection{QP: 0x118, HasQP: true}, 1, ToRight},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := FromCapture(tc.pkts, flowstest.Analyse(tc.pkts, flows.Options{}), tc.sel)
			require.NoError(t, err)
			var cnp *Item
			for i, it := range d.Items {
				if it.Frame == tc.frame {
					cnp = &d.Items[i]
				}
			}
			require.NotNil(t, cnp)
			require.Equal(t, CNP, cnp.Kind)
			require.Equal(t, tc.dir, cnp.Dir)
			require.Equal(t, "CNP", cnp.Label)
			require.Equal(t, "congestion notification (CNP)", kindNames[CNP])
		})
	}
}
