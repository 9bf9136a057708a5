package perftest

import (
	"strings"
	"testing"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/stretchr/testify/require"
)

// TestUseSRQ: with --use-srq the ends that receive (send-bw's server,
// both ends of send-lat and of send-bw -b) create one SRQ and their QPs
// take their receives from it (created without a receive queue of their
// own), every message arrives, and the header says "Using SRQ : ON".
func TestUseSRQ(t *testing.T) {
	tests := []struct {
		cmd             string
		args            []string
		client, server  bool // which ends have the SRQ
		clientRx, srvRx int  // their QPs' own receive depth
	}{
		{"send-bw", []string{"-q", "3", "-n", "300", "-s", "4096"}, false, true, 0, 0},
		{"send-bw", []string{"-q", "2", "-n", "200", "-b", "-s", "4096"}, true, true, 0, 0},
		{"send-lat", []string{"-n", "200"}, true, true, 0, 0},
		{"send-bw", []string{"-q", "2", "-n", "200", "-c", "UD", "-s", "1024"}, false, true, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.cmd+strings.Join(tc.args, ""), func(t *testing.T) {
			cs, ss := loopbackSessions(t, tc.cmd, append(tc.args, "--use-srq")...)
			for _, e := range []struct {
				s      *session
				hasSRQ bool
			}{{cs, tc.client}, {ss, tc.server}} {
				require.Equal(t, e.hasSRQ, e.s.srq != nil)
				if e.hasSRQ {
					// One receive CQ, so one vector's goroutine, writes
					// the buffers the SRQ's WQEs name (createCQs).
					require.Len(t, e.s.rset.cqs, 1)
				}
				for _, qp := range e.s.qps {
					if e.hasSRQ {
						require.Zero(t, qp.Cap().MaxRecvWR, "a QP on the SRQ has no receive queue of its own")
					}
				}
			}
			if tc.cmd == "send-bw" && !strings.Contains(strings.Join(tc.args, " "), "UD") {
				// The server counts what arrived as it does without the
				// SRQ. (With UD a message that finds the SRQ empty is
				// dropped, as with a QP's own queue: -r receives for
				// all the QPs lose some; only the SRQ's use is checked.)
				_, plain := loopbackSessions(t, tc.cmd, tc.args...)
				require.Nil(t, plain.srq)
				require.Len(t, ss.bwResults, 1)
				require.Len(t, plain.bwResults, 1)
				require.Equal(t, plain.bwResults[0].Iters, ss.bwResults[0].Iters, "every message arrived")
				require.Positive(t, ss.bwResults[0].Iters)
			}
		})
	}
	// With -R the rdma_cm connections' QPs are created on the SRQ too.
	_, ss := loopbackCMSessions(t, "send-bw", "-q", "2", "-n", "200", "-s", "4096", "--use-srq")
	require.NotNil(t, ss.srq)
	require.Len(t, ss.qps, 2)
	for _, qp := range ss.qps {
		require.Zero(t, qp.Cap().MaxRecvWR)
	}
	require.Equal(t, uint64(400), ss.bwResults[0].Iters)
	out, errs, code := runCmd(t, "send-bw", "--loopback", "--udp-port", "0", "-q", "2", "-n", "100", "--use-srq")
	require.Equal(t, cli.ExitOK, code, errs)
	require.Contains(t, out, "Using SRQ      : ON\n")
	out, errs, code = runCmd(t, "send-bw", "--loopback", "--udp-port", "0", "-n", "100")
	require.Equal(t, cli.ExitOK, code, errs)
	require.Contains(t, out, "Using SRQ      : OFF\n")
}

// TestUseSRQErrors: --use-srq outside the SEND tests, and an SRQ smaller
// than the QPs.
func TestUseSRQErrors(t *testing.T) {
	requireUsageErrors(t, []usageCase{
		{[]string{"write-bw", "--use-srq"}, "--use-srq is for the SEND tests"},
		{[]string{"read-lat", "--use-srq"}, "--use-srq is for the SEND tests"},
		{[]string{"send-bw", "--use-srq", "-q", "8", "-n", "5"}, "--use-srq: the receive depth 5, the SRQ's size, is less than the QPs -q 8"},
		{[]string{"send-bw", "--use-srq", "-q", "3", "-r", "2"}, "--use-srq: the receive depth 2, the SRQ's size, is less than the QPs -q 3"},
		// force_dependecies checks the depth before it makes an odd one
		// even: -r 3 is refused for 4 QPs, though 4 receives are posted.
		{[]string{"send-bw", "--use-srq", "-q", "4", "-r", "3"}, "--use-srq: the receive depth 3, the SRQ's size, is less than the QPs -q 4"},
	})
}
