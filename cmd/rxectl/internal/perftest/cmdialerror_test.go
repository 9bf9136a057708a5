package perftest

import (
	"context"
	"errors"
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
			err := st.dialError(context.Background(), tc.err, false, 1, 0)
			require.ErrorIs(t, err, tc.err)
			require.ErrorContains(t, err, "rdma_cm connect to 192.0.2.1:18515: ")
			require.ErrorContains(t, err, tc.want)
			if tc.exchange {
				require.NotContains(t, err.Error(), "is an RDMA device")
			}
		})
	}
}

// TestCMDialErrorRefused: a connection attempt refused on every try is
// explained by what this end knows of the server. Before the exchange's
// connection is up, nobody listens on the port. Once it is up, the server
// is there: if it refused the first test QP, it took none of this end's
// (it listens for another -c, whose requests have another service ID, or
// does not listen: perftest's server listens for the test QPs only after
// the first exchange and stops after its last), so it does not "run fewer
// test QPs"; if it refused a later one after connecting the earlier ones,
// it takes no more test QPs (a smaller -q), and another -c cannot be the
// cause, as its first test QP would have been refused.
func TestCMDialErrorRefused(t *testing.T) {
	for _, tc := range []struct {
		name      string
		exchange  bool
		qp        int
		want      string
		notWanted []string
	}{
		{"no exchange", false, 0,
			"refused 10 times, nobody listens on RDMA CM port 18515", []string{"test QP"}},
		{"exchange up, first test QP", true, 0,
			"refused 10 times (refused): the server, whose exchange connection is up, takes no test QP on RDMA CM port 18515: it runs another -c, or it does not listen (it stopped or stalls: see its output)",
			[]string{"fewer", "no more", "-q"}},
		{"exchange up, second test QP", true, 1,
			"refused 10 times (refused): the server took 1 test QP and takes no more: it runs fewer (a smaller -q: give both ends the same)",
			[]string{"-c"}},
		{"exchange up, third test QP", true, 2,
			"the server took 2 test QPs and takes no more", []string{"-c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &cmState{client: true, target: "192.0.2.1:18515", port: 18515, udpPort: 4791}
			if tc.exchange {
				st.pipe = &cmPipe{st: st}
			}
			refusal := errors.New("refused")
			err := st.dialError(context.Background(), refusal, true, 10, tc.qp)
			require.ErrorIs(t, err, refusal)
			require.ErrorContains(t, err, "rdma_cm connect to 192.0.2.1:18515: ")
			require.ErrorContains(t, err, tc.want)
			for _, s := range tc.notWanted {
				require.NotContains(t, err.Error(), s)
			}
		})
	}
}
