package requester

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// TestSRLossyLink runs 64 KiB WRITEs, SENDs and READs with selective repeat
// over a timed link that loses packets at random both ways, and checks:
// everything completes byte-exact, in order; no go-back-N; no IB timeout
// at up to 2% loss; and the packets sent beyond what a loss-free run
// needs stay within twice the packets lost, both ways (the target
// is 1.5 resent per lost packet on average; these runs give 0.84 to 1.0).
//
// The same runs also go without selective repeat on either end, for
// comparison in the log (only completion and data are checked then).
func TestSRLossyLink(t *testing.T) {
	for _, sr := range []bool{true, false} {
		t.Run(fmt.Sprintf("sr=%v", sr), func(t *testing.T) { testLossyLink(t, sr) })
	}
}

func testLossyLink(t *testing.T, sr bool) {
	const pmtu, size, n = 1024, 64 << 10, 24
	for _, tc := range []struct {
		op   verbs.WROpcode
		loss float64
		seed uint64
	}{
		{verbs.WRRDMAWrite, 0.01, 1}, {verbs.WRRDMAWrite, 0.02, 2}, {verbs.WRRDMAWrite, 0.05, 3},
		{verbs.WRSend, 0.01, 4}, {verbs.WRSend, 0.05, 5},
		{verbs.WRRDMARead, 0.01, 6}, {verbs.WRRDMARead, 0.02, 7}, {verbs.WRRDMARead, 0.05, 8},
	} {
		t.Run(fmt.Sprintf("%v/%v", tc.op, tc.loss), func(t *testing.T) {
			cfg := baseConfig(pmtu, 0x10)
			cfg.SelectiveRepeat = sr
			cfg.MaxWR = n
			h := newHarness(t, cfg)
			h.mem.add(lkeyA, baseA, n*size, verbs.AccessLocalWrite, 1)
			f := newResponder(t, pmtu, 0x10)
			f.sr.on = sr
			remote := f.mem.add(rkey, rbase, n*size, verbs.AccessRemoteWrite|verbs.AccessRemoteRead, 7)
			src := append([]byte(nil), remote.buf...)
			l := newSRLink(h, f)
			lost, took := l.lossyBatch(t, tc.op, n, size, tc.loss, rand.New(rand.NewPCG(tc.seed, 13)))
			switch tc.op {
			case verbs.WRRDMARead:
				require.True(t, bytes.Equal(src, h.mem[lkeyA].buf), "READ data")
			case verbs.WRSend:
				require.Len(t, f.msgs, n)
				require.True(t, bytes.Equal(h.mem[lkeyA].buf, bytes.Join(f.msgs, nil)), "SEND data")
			default:
				require.True(t, bytes.Equal(h.mem[lkeyA].buf, remote.buf), "WRITE data")
			}
			c := h.r.Counters()
			// Data packets sent beyond what a loss-free run needs: the
			// requests of a WRITE or SEND, the responses of a READ (whose
			// re-read requests are counted apart).
			data := n * size / pmtu
			extra, rereads := len(l.sent)-data, 0
			if tc.op == verbs.WRRDMARead {
				extra, rereads = l.respSent()-data, len(l.sent)-n
			}
			t.Logf("%v virtual; %d lost, %d data packets sent again (%.2f per lost), %d re-read requests; "+
				"holes %d, resent %d, re-reads %d, probes %d, rto %d, ib timeouts %d",
				took, lost, extra, float64(extra)/float64(max(lost, 1)), rereads,
				c.SRHolesReceived, c.SRPacketsResent, c.ReadHoleRereads, c.Recovery.TailProbes,
				c.Recovery.RTOExpiries, c.Timeouts)
			if !sr {
				return
			}
			require.Zero(t, c.CompleterRetryErr, "go-back-N")
			if tc.loss <= 0.02 {
				require.Zero(t, c.Timeouts, "IB timeouts")
			}
			require.LessOrEqual(t, extra, 2*lost+int(c.Recovery.TailProbes), "data packets sent again")
			require.LessOrEqual(t, rereads, 2*lost+int(c.Recovery.TailProbes), "re-reads")
		})
	}
}

// respSent returns the data responses the responder sent (READ responses).
func (l *srLink) respSent() int {
	n := 0
	for _, c := range l.seenResp {
		n += c
	}
	return n
}
