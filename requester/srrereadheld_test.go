package requester

import (
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// TestSRRereadReorderedPastReport: READ 1 loses response 3 and READ 2
// responses 5 and 7, each re-read alone (extra streams, in that order);
// READ 3's request, sent after them, is lost, and READ 4's makes the
// responder report the hole, naming READ 4 received. The answer to the
// re-read of READ 2's response 5 is overtaken by that report and by the
// answer to the re-read of 7 (two packets, fewer than srReorder), and both
// come when srDetect looks at every missing PSN again (once per interval),
// less than an interval after that re-read left. That is no loss: the
// answer of the later re-read proves nothing about the earlier one for
// srDetect (srLost counts any later re-read answered, with no margin, so
// it relies on the resend interval), and the report names nothing READ 2
// asked for, so 5 is asked for once.
func TestSRRereadReorderedPastReport(t *testing.T) {
	o := newOrderHarness(t, 4, rttTest)
	o.read(1)
	o.read(2)
	o.collect()
	require.Len(t, o.sent, 2, "READs 1 and 2")
	o.now = o.now.Add(rttTest)
	o.answer(1, 3)
	a, c := o.first(2).Add(5), o.first(2).Add(7)
	o.answer(2, 5, 7)
	require.Len(t, o.rereadsAt(o.first(1).Add(3)), 1, "READ 1's 3 re-read")
	require.Len(t, o.rereadsAt(a), 1, "READ 2's 5 re-read")
	require.Len(t, o.rereadsAt(c), 1, "READ 2's 7 re-read")
	o.in(o.reread(1, 3, 4, 3))
	o.now = o.now.Add(time.Microsecond)
	o.read(3)
	o.read(4)
	o.collect()
	require.Equal(t, o.first(4), o.sent[len(o.sent)-1].p.PSN(), "READs 3 and 4 sent after the re-reads")

	// At the next look at every missing PSN, still within the resend
	// interval of 5's re-read.
	rescan := o.r.sr.timeAt(o.r.sr.rescan)
	ra := o.rereadsAt(a)[0]
	require.True(t, rescan.After(o.now) && rescan.Before(ra.Add(o.r.srInterval(o.now))),
		"the look at every PSN comes within the interval of 5's re-read")
	// The responder got READ 4 but not READ 3: the hole report (the
	// responder's first PSN held after the hole is READ 4's).
	o.until(rescan.Add(-time.Microsecond))
	o.in(resp(packet.RCAcknowledge, o.first(3), packet.NAKSyndrome(packet.NAKSelectiveRepeat), uint32(o.first(4)), nil))
	o.until(rescan)
	o.in(o.reread(2, 7, 8, 7))
	o.now = o.now.Add(time.Microsecond)
	o.in(o.reread(2, 5, 6, 5))
	require.Len(t, o.rereadsAt(a), 1, "READ 2's 5 asked for once: its answer was only overtaken")
	require.Zero(t, o.r.Counters().SRResendsLost)
}
