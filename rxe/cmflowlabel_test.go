//go:build linux

package rxe

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestREQFlowLabel: a Dial's REQ carries in its primary path the flow
// label rdma_cm gives a RoCEv2 route (cma_get_roce_udp_flow_label): the
// RDMA CM source port times 31 plus the destination port, in 20 bits. The
// first row is the kernel-rxe capture's REQ (10.77.0.3:57410 →
// 10.77.0.2:18515, flow label 0xb7051), from which both kernel QPs took
// their UDP source port 61564.
func TestREQFlowLabel(t *testing.T) {
	d := tcDevice(t, netip.MustParseAddrPort("127.0.0.1:0"), 0)
	e := newEnd(t, d, 4096)
	for _, tc := range []struct {
		sport, dport uint16
		want         uint32
	}{
		{57410, 18515, 0xb7051},
		{32768, 7471, (32768*31 + 7471) & 0xFFFFF},
		{65535, 65535, (65535*31 + 65535) & 0xFFFFF},
		{1, 0, 31},
	} {
		from := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), tc.sport)
		to := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), tc.dport)
		req := buildREQ(d, e.qp, from, to, 1, &CMOptions{Timeout: 14, RetryCnt: 7, RNRRetry: 7, MTU: MTU1024})
		require.Equal(t, tc.want, req.Primary.FlowLabel, "%d → %d", tc.sport, tc.dport)
	}
}
