package perftest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
	"github.com/gorxe/gorxe/rxe"
)

// Rate limits and verifier limits of the bandwidth tests: perftest's
// software rate limiter (--rate_limit with --rate_limit_type SW,
// --rate_units, --burst_size), which paces the client's posts, and its
// verifier limits -w (--limit_bw) and -y (--limit_msgrate), which fail a
// run whose results stay below them; and the latency tests'
// --latency_gap.

// rateUnitsFlag is --rate_units: perftest's M (MiB/s), g (Gb/s) or p
// (messages per second).
type rateUnitsFlag string

// String is the units' letter.
func (f *rateUnitsFlag) String() string {
	if f == nil || *f == "" {
		return "g"
	}
	return string(*f)
}

// Set takes M, g or p, as perftest does.
func (f *rateUnitsFlag) Set(v string) error {
	switch v {
	case "M", "g", "p":
		*f = rateUnitsFlag(v)
		return nil
	}
	return fmt.Errorf("%q: M (MiB/s), g (Gb/s) or p (messages per second), as perftest's --rate_units", v)
}

// rateTypeFlag is --rate_limit_type. Only SW exists here: HW is a NIC's
// per-QP rate limiter and PP its packet pacing, which perftest offers for
// raw Ethernet only.
type rateTypeFlag string

// String is the type given, or SW.
func (f *rateTypeFlag) String() string {
	if f == nil || *f == "" {
		return "SW"
	}
	return string(*f)
}

// Set takes SW and explains why HW and PP are refused.
func (f *rateTypeFlag) Set(v string) error {
	switch v {
	case "SW":
		*f = rateTypeFlag(v)
		return nil
	case "HW":
		return errors.New("HW: gorxe has no hardware rate limiter (HW programs a NIC's per-QP rate); use SW, rxectl's software rate limiter, which is also what --rate_limit alone uses here")
	case "PP":
		return errors.New("PP: packet pacing is a NIC feature that perftest offers for raw Ethernet only; use SW")
	}
	return fmt.Errorf("%q: SW (HW and PP are NIC features gorxe does not have)", v)
}

// checkRate checks the rate limiter's and the verifier's flags, and
// --latency_gap and --retry_count.
func (o *options) checkRate() error {
	limited := o.set["rate_limit"]
	switch {
	case o.limitBW < 0:
		return fmt.Errorf("-w %g: a bandwidth limit is not negative (perftest: \"Invalid Minimum BW Limit\")", o.limitBW)
	case o.limitMsgRate < 0:
		return fmt.Errorf("-y %g: a message rate limit is not negative (perftest: \"Invalid Minimum msgRate Limit\")", o.limitMsgRate)
	case o.latencyGap < 0 || o.latencyGap > maxLatencyGap:
		return fmt.Errorf("--latency_gap %d: microseconds, 0 to %d (1 s)", o.latencyGap, maxLatencyGap)
	case o.latencyGap > 0 && (o.connType == "UC" || o.connType == "UD") && time.Duration(o.latencyGap)*time.Microsecond*2 > o.lossWait:
		return fmt.Errorf("--latency_gap %d: -c %s's peer ends the run when a message is %v late (--loss-wait): keep the gap under half of that", o.latencyGap, o.connType, o.lossWait)
	case o.set["retry_count"] && (o.retryCount < 0 || o.retryCount > 7):
		return fmt.Errorf("--retry_count %d not in [0, 7] (the QP's retry_cnt is 3 bits, IBA 11.2.4.2)", o.retryCount)
	case o.burstSize < 0:
		return fmt.Errorf("--burst_size %d: a number of messages, 1 or more (0: the tx depth)", o.burstSize)
	case !limited && (o.set["rate_limit_type"] || o.set["rate_units"]):
		return errors.New("--rate_limit_type and --rate_units shape a rate limit: give --rate_limit too")
	case !limited && o.burstSize > 0:
		return errors.New("--burst_size needs --rate_limit (perftest: \"Can't enable burst mode when rate limiter is off\")")
	case !limited:
		return nil
	case !(o.rateLimit > 0) || o.rateLimit > 1e15:
		return fmt.Errorf("--rate_limit %g: a positive number (perftest: \"Rate limit must be non-negative floating point number\")", o.rateLimit)
	}
	return nil
}

// rateNote is perftest's note when --burst_size is left to the tx depth
// (not given, or 0).
func (o *options) rateNote() string {
	if o.set["rate_limit"] && o.burstSize <= 0 {
		return fmt.Sprintf(" Setting burst size to tx depth = %d", o.txDepth)
	}
	return ""
}

// burst is the number of messages a rate limiter's burst posts: the
// --burst_size given, else the tx depth, as perftest.
func (o *options) burst() int {
	if o.burstSize > 0 {
		return o.burstSize
	}
	return o.txDepth
}

// ratePPS is the rate limit in messages per second for size-byte
// messages, as perftest's run_iter_bw converts it: MiB/s and Gb/s divided
// by the message size (0 without a limit).
func (o *options) ratePPS(size int) float64 {
	if !o.set["rate_limit"] {
		return 0
	}
	switch o.rateUnits.String() {
	case "M":
		return o.rateLimit * 1048576 / float64(size)
	case "p":
		return o.rateLimit
	default: // g
		return o.rateLimit * 1e9 / (float64(size) * 8)
	}
}

// rateSummary is the header line's value: the limit, its units and the
// bursts.
func (o *options) rateSummary() string {
	unit := map[string]string{"M": "MiB/s", "g": "Gb/s", "p": "messages/s"}[o.rateUnits.String()]
	return fmt.Sprintf("%s %s in bursts of %d (SW)", strconv.FormatFloat(o.rateLimit, 'g', -1, 64), unit, o.burst())
}

// pacer is perftest's software rate limiter for one run of size-byte
// messages: the client posts in bursts of burst messages, over all its
// QPs, and a burst starts only once the one before it is a gap old, gap
// being burst messages at the limit's rate. As perftest's run_iter_bw
// (gap_deadline set one gap after the burst it lets go), the next burst is
// due one gap after this one starts, not after this one was due: a burst
// that starts late (the poster stalled) does not make the bursts after it
// go back to back to catch up, which would send the receiver several
// bursts at once, more than an unpaced UD receiver's posted buffers hold.
type pacer struct {
	gap   time.Duration
	burst int
	due   time.Time // when the next burst may start
	left  int       // messages the current burst may still post (0: none under way)
}

// newPacer returns the pacer of a run of size-byte messages starting now,
// nil without --rate_limit.
func (o *options) newPacer(size int, now time.Time) *pacer {
	pps := o.ratePPS(size)
	if pps <= 0 {
		return nil
	}
	b := o.burst()
	gap := time.Duration(float64(b) / pps * 1e9) // at most maxPaceGap (checkPace)
	return &pacer{gap: max(gap, 1), burst: b, due: now}
}

// ready reports whether a message may be posted now, starting a burst
// when none is under way and the next is due. A nil pacer always allows.
func (p *pacer) ready() bool {
	if p == nil || p.left > 0 {
		return true
	}
	now := time.Now()
	if now.Before(p.due) {
		return false
	}
	p.due = now.Add(p.gap)
	p.left = p.burst
	return true
}

// posted counts n messages posted (a post list, -l, counts whole).
func (p *pacer) posted(n int) {
	if p != nil {
		p.left = max(p.left-n, 0)
	}
}

// spent reports whether the pacer's last burst is over, so that the
// next post waits for the next burst (which may be due already).
func (p *pacer) spent() bool { return p != nil && p.left == 0 }

// waitSendCQPaced waits for send completions as waitSendCQ; but once the
// pacer's burst is spent (and more is to be posted) only until the next
// burst is due, or until edge (a -D run's next window edge or end; zero:
// none), whichever comes first, returning 0 then. With no signaled
// request outstanding it sleeps until then (ctx ends the sleep early):
// it never waits for a completion with none outstanding, whatever the
// clock did since the post loop looked. With requests outstanding and
// the burst due already (the send queue is full) it waits for a
// completion as waitSendCQ does, rather than spinning until one comes.
func (s *session) waitSendCQPaced(ctx context.Context, wcs []rxe.WC, p *pacer, outstanding int, edge time.Time) (int, error) {
	if !p.spent() || outstanding > 0 && !time.Now().Before(p.due) {
		return s.waitSendCQ(wcs)
	}
	if n := s.sset.poll(wcs); n > 0 {
		return n, nil
	}
	until := p.due
	if !edge.IsZero() && edge.Before(until) {
		until = edge
	}
	if outstanding == 0 {
		t := time.NewTimer(time.Until(until))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return 0, nil
	}
	wctx, cancel := context.WithDeadline(context.Background(), until)
	defer cancel()
	n, err := s.waitCQs(wctx, &s.sset, wcs)
	if err != nil && wctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
		return 0, nil // the next burst is due, or the run's end
	}
	return n, err
}

// maxPaceGap bounds the time between two bursts: a peer waits
// stallTimeout for a message before it gives up (send-bw's server), and
// a burst every 30 s keeps well within that.
const maxPaceGap = stallTimeout / 2

// checkPace checks, once the tx depth is settled, that the rate limit
// gives a gap between bursts of at most maxPaceGap for every size of
// the run.
func (o *options) checkPace() error {
	if !o.set["rate_limit"] || o.duration == 0 && o.iters*o.qps <= o.burst() {
		return nil // no limit, or an iteration run whose one burst goes at once
	}
	for _, size := range o.sizes() {
		if gap := float64(o.burst()) / o.ratePPS(size); !(gap <= maxPaceGap.Seconds()) {
			return fmt.Errorf("--rate_limit %g with bursts of %d %d-byte messages: a burst every %.3g s, and the peer gives up after %v without a message; raise the rate or lower --burst_size",
				o.rateLimit, o.burst(), size, gap, stallTimeout)
		}
	}
	return nil
}

// checkLimits is perftest's verifier: with -w the run fails unless a row
// of this end reached the bandwidth limit, with -y unless one reached the
// message rate limit (perftest keeps a pass over the rows, so with -a one
// size is enough). As perftest's print_full_bw_report, a WRITE or READ
// server verifies the client's row it prints.
func (s *session) checkLimits() error {
	o := s.o
	if len(s.bwResults) == 0 || !o.set["limit_bw"] && !o.set["limit_msgrate"] {
		return nil
	}
	bwOK, rateOK := !o.set["limit_bw"], !o.set["limit_msgrate"]
	best, bestRate := 0.0, 0.0
	for _, r := range s.bwResults {
		best, bestRate = max(best, r.Avg), max(bestRate, r.MsgRate)
		bwOK = bwOK || r.Avg >= o.limitBW
		rateOK = rateOK || r.MsgRate >= o.limitMsgRate
	}
	switch {
	case !bwOK:
		return fmt.Errorf("the bandwidth %.2f %s is below the limit -w %g (perftest: \"BW result is below bw limit\")", best, report.BWUnit(o.gbits), o.limitBW)
	case !rateOK:
		return fmt.Errorf("the message rate %.6f Mpps is below the limit -y %g (perftest: \"Msg rate is below msg_rate limit\")", bestRate, o.limitMsgRate)
	}
	return nil
}

// limitsJSON is the "limits" object of --json: the limits given and
// whether the run met them.
func (s *session) limitsJSON() map[string]any {
	o := s.o
	if !o.set["limit_bw"] && !o.set["limit_msgrate"] {
		return nil
	}
	m := map[string]any{"passed": s.checkLimits() == nil}
	if o.set["limit_bw"] {
		m["bw"] = o.limitBW
	}
	if o.set["limit_msgrate"] {
		m["msg_rate_mpps"] = o.limitMsgRate
	}
	return m
}

// rateJSON is the "rate_limit" object of --json.
func (o *options) rateJSON() map[string]any {
	if !o.set["rate_limit"] {
		return nil
	}
	return map[string]any{"rate": o.rateLimit, "units": o.rateUnits.String(), "burst": o.burst(), "type": "SW"}
}

// maxLatencyGap bounds --latency_gap, in µs: a peer waits for each
// message (60 s for RC, --loss-wait for UC and UD).
const maxLatencyGap = 1_000_000

// latencyGapWait is --latency_gap before a latency test's post: it waits
// the gap, sleeping through all but its last 100 µs and spinning those,
// as perftest spins on the cycle counter, so that the post is not late
// by a timer's lateness. ctx ends the wait early.
func (o *options) latencyGapWait(ctx context.Context) {
	if o.latencyGap <= 0 {
		return
	}
	gap := time.Duration(o.latencyGap) * time.Microsecond
	end := time.Now().Add(gap)
	if gap > 200*time.Microsecond {
		t := time.NewTimer(gap - 100*time.Microsecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
	for time.Now().Before(end) {
		// perftest spins on the cycle counter the same way.
	}
}
