package netdev

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestUDPHugeBufferRequests: a buffer request beyond what setsockopt's int
// holds gets what the largest request gets (the kernel's own bound: INT_MAX
// / 2 with SO_RCVBUFFORCE, net.core.rmem_max without), not the low 32 bits
// of the request, which left a 3 GiB request with the kernel's minimum
// buffer (2304 bytes).
func TestUDPHugeBufferRequests(t *testing.T) {
	for _, noForce := range []bool{false, true} {
		ref := listen(t, lo4, Options{RecvBuffer: math.MaxInt32, SendBuffer: math.MaxInt32, NoForce: noForce}).BufferSizes()
		for _, size := range []int{3 << 30, 1<<32 + 4096} {
			t.Run(fmt.Sprintf("noForce=%v/%d", noForce, size), func(t *testing.T) {
				got := listen(t, lo4, Options{RecvBuffer: size, SendBuffer: size, NoForce: noForce}).BufferSizes()
				require.Equal(t, ref.Recv, got.Recv)
				require.Equal(t, ref.Send, got.Send)
				require.Equal(t, size, got.RecvAsked)
				require.True(t, got.RecvCapped(), "less than asked")
			})
		}
	}
}
