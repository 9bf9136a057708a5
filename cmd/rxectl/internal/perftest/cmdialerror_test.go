package perftest

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/rxe"
)

// TestCMDialErrorTimeout: a connection attempt that gets no answer is
// explained by what this end knows of the server. Before the exchange's
// connection is up, nothing shows a device at the address, and the text
// asks whether one is there. Once it is up (st.pipe, the failed Dial is a
// test QP's), the server's device has answered on the same address and
// UDP port, so the text says the server is there and did not answer the
// test QP's request in time, and names the causes of that, not a missing
// device.
func TestCMDialErrorTimeout(t *testing.T) {
	for _, tc := range []struct {
		name     string
		exchange bool
		err      error
		want     string
	}{
		{"no exchange, CM timeout", false, rxe.ErrCMTimeout,
			"is an RDMA device (rxectl or kernel rxe) on UDP 4791 there?"},
		{"no exchange, deadline", false, context.DeadlineExceeded,
			"is an RDMA device (rxectl or kernel rxe) on UDP 4791 there?"},
		{"exchange up, CM timeout", true, rxe.ErrCMTimeout,
			"the server, whose exchange connection is up, did not answer the test QP's request within 10s"},
		{"exchange up, deadline", true, fmt.Errorf("dial: %w", context.DeadlineExceeded),
			"the server, whose exchange connection is up, did not answer the test QP's request within 10s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &cmState{client: true, target: "192.0.2.1:18515", udpPort: 4791}
			if tc.exchange {
				st.pipe = &cmPipe{st: st}
			}
			err := st.dialError(context.Background(), tc.err, false, 1)
			require.ErrorIs(t, err, tc.err)
			require.ErrorContains(t, err, "rdma_cm connect to 192.0.2.1:18515: ")
			require.ErrorContains(t, err, tc.want)
			if tc.exchange {
				require.NotContains(t, err.Error(), "is an RDMA device")
			}
		})
	}
}
