package requester

import (
	"fmt"
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// TestSRLostResendBlockedWindow runs the requester against the responder
// engine over a link whose round trip is longer than the window takes to
// send: when a packet and then its resend are lost, the window is blocked
// behind the hole, nothing more reaches the responder and it never
// reports the hole again. The requester takes its own resend as lost once
// it is unacknowledged an interval (about an RTT) after it went, and
// resends it again: no recovery timer expiry, no tail-loss probe, no IB
// timeout, and the transfer takes a few round trips more than a loss-free
// one, not a recovery timeout. A resend lost twice waits twice as long
// the second time (srMark's back-off), which the recovery timer's probe
// may beat; either way the IB timeout is not reached.
func TestSRLostResendBlockedWindow(t *testing.T) {
	const pmtu, size, n = 1024, 64 << 10, 8
	for _, tc := range []struct {
		op     verbs.WROpcode
		at     int // PSN offset lost
		losses int // times it is lost: first sent, then resent
	}{
		{verbs.WRRDMAWrite, 150, 2}, {verbs.WRRDMAWrite, 150, 3}, {verbs.WRSend, 300, 2}, {verbs.WRRDMAWrite, 20, 2},
	} {
		t.Run(fmt.Sprintf("%v/%d/%d", tc.op, tc.at, tc.losses), func(t *testing.T) {
			cfg := baseConfig(pmtu, 0x10)
			cfg.SelectiveRepeat = true
			cfg.MaxWR = n
			h := newHarness(t, cfg)
			h.mem.add(lkeyA, baseA, n*size, verbs.AccessLocalWrite, 1)
			e := newEngineResponder(h, pmtu, 0x10, size, n)
			remote := e.mem.add(rkey, rbase, n*size, verbs.AccessRemoteWrite, 7)
			l := newSRLink(h, e)
			l.delay = 200 * time.Microsecond
			target := packet.PSN(0x10).Add(tc.at)
			l.dropReq = func(p packet.Packet, nth int) bool { return p.PSN() == target && nth <= tc.losses }
			for i := range n {
				h.post(&verbs.SendWR{ID: uint64(i + 1), Opcode: tc.op, Flags: verbs.SendSignaled,
					RemoteAddr: rbase + uint64(i*size), RKey: rkey,
					SGList: []verbs.SGE{{Addr: baseA + uint64(i*size), Length: size, LKey: lkeyA}}})
			}
			start := h.now
			l.run(10 * time.Second)
			requireClean(t, h, n)
			if tc.op == verbs.WRSend {
				require.Equal(t, h.mem[lkeyA].buf, e.mem[recvKey].buf, "SEND data")
			} else {
				require.Equal(t, h.mem[lkeyA].buf, remote.buf, "WRITE data")
			}
			c := h.r.Counters()
			t.Logf("%v virtual; holes %d, resent %d, resends lost %d, probes %d, rto %d, ib timeouts %d, srtt %v",
				h.now.Sub(start), c.SRHolesReceived, c.SRPacketsResent, c.SRResendsLost, c.Recovery.TailProbes,
				c.Recovery.RTOExpiries, c.Timeouts, h.r.rec.rtt.SRTT())
			require.Positive(t, c.SRResendsLost, "lost resends found")
			if tc.losses == 2 {
				require.Equal(t, tc.losses, l.sentCount(target)-1, "the lost PSN sent again")
				require.Equal(t, uint64(1), c.SRResendsLost, "lost resends found")
				require.Zero(t, c.Recovery.TailProbes, "tail-loss probes")
				require.Zero(t, c.Recovery.RTOExpiries, "recovery timer expiries")
			}
		})
	}
}
