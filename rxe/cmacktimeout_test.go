//go:build linux

package rxe

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestREQLocalACKTimeout: a Dial's REQ carries the Local ACK Timeout
// kernel ib_cm puts in an rdma_cm REQ whose id has the QP's ACK timeout
// set, as perftest sets -u (cm_format_req, cm_ack_timeout): from rdma_cm's
// packet life time, the timeout less one or 16 for no timeout
// (cma_resolve_iboe_route), and the device's CA ACK delay, 15. It is
// never 0, which a kernel passive side would turn into its QP's shortest
// timeout; the QP's own timeout stays as given.
func TestREQLocalACKTimeout(t *testing.T) {
	d := tcDevice(t, netip.MustParseAddrPort("127.0.0.1:0"), 0)
	e := newEnd(t, d, 4096)
	from, to := netip.MustParseAddrPort("127.0.0.1:40000"), netip.MustParseAddrPort("127.0.0.2:7471")
	for _, tc := range []struct {
		timeout, want uint8
	}{
		{14, 16}, // perftest's -u default: life time 13, below the ACK delay
		{0, 17},  // no timeout: CMA_IBOE_PACKET_LIFETIME 16
		{1, 15},
		{13, 15},
		{15, 16},
		{16, 17},
		{19, 19}, // life time 18: the kernel-rxe capture's REQ (kernel 6.1's default life time)
		{31, 31},
	} {
		req := buildREQ(d, e.qp, from, to, 1, &CMOptions{Timeout: tc.timeout, RetryCnt: 7, RNRRetry: 7, MTU: MTU1024})
		require.Equal(t, tc.want, req.Primary.LocalACKTimeout, "timeout %d", tc.timeout)
	}
}
