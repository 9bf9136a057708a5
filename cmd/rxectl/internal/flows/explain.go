package flows

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// explain says in sentences what went wrong on a connection: what was lost,
// what recovered it and how long that took, and any NAK that ended it.
func explain(c *Connection, halves map[int]*half, order []int) []string {
	var out []string
	var hs []*half
	for _, fi := range order {
		if h := halves[fi]; h != nil {
			hs = append(hs, h)
		}
	}
	for _, h := range hs {
		var eps []Recovery
		for _, ep := range c.Recoveries {
			if ep.Requester == h.req.Src {
				eps = append(eps, ep)
			}
		}
		s := lossSentence(h, eps)
		if r := recoverySentence(eps); r != "" {
			if s != "" {
				s += "; recovered by " + r
			} else {
				s = "Recovered by " + r
			}
		}
		if s != "" {
			if len(hs) > 1 {
				s = h.req.Src.String() + " → " + h.req.Dst.String() + ": " + s
			}
			out = append(out, s+".")
		}
		for _, f := range h.fatal {
			out = append(out, fmt.Sprintf("%s NAK at frame %d (PSN %d): the requester's QP goes to the error state and flushes its outstanding work requests.",
				nakName(f.code), f.frame, f.psn))
		}
		if h.resp != nil && h.resp.NAKs.RNR > 0 && !slices.ContainsFunc(eps, func(e Recovery) bool { return e.Cause == CauseRNR }) {
			out = append(out, count(h.resp.NAKs.RNR, "RNR NAK")+": the responder had no receive WQE posted.")
		}
	}
	return out
}

// lossSentence says what the capture shows lost for one requester.
func lossSentence(h *half, eps []Recovery) string {
	var parts []string
	if h.resp != nil && h.resp.PSNMissing > 0 {
		parts = append(parts, gapClauses(h.resp, "READ response")...)
	}
	switch {
	case h.req.PSNMissing > 0 && h.resp == nil && !h.started:
		// A lone flow of READ responses whose requests the capture does
		// not hold: its gaps are the responses'.
		parts = append(parts, gapClauses(h.req, "READ response")...)
	case h.req.PSNMissing > 0:
		parts = append(parts, gapClauses(h.req, "")...)
	}
	// The capture holds the first copy of what was resent: a READ
	// response, or a request that no ACK had acknowledged (after) or one
	// that an ACK had (acked). An episode proves one such copy lost, the
	// first PSN it resent; its other resends may ask again for more lost
	// copies (selective repeat re-reads several holes in one episode) or
	// for packets that arrived (go-back-N resends all after the first), which
	// the capture cannot tell apart, so several episodes give a lower
	// bound ("at least").
	var after, timed, acked []Recovery
	for _, ep := range eps {
		switch {
		case ep.FirstSentFrame == 0 || ep.Cause == CauseRNR:
		case ep.AckedFrame > 0:
			acked = append(acked, ep)
		case !ep.Read && timerDriven(ep.Cause):
			timed = append(timed, ep)
		default:
			after = append(after, ep)
		}
	}
	switch {
	case len(after) == 1 && after[0].Read:
		parts = append(parts, fmt.Sprintf("READ response PSN %d (frame %d) lost after the capture point: the capture holds it, yet it was read again",
			after[0].PSN, after[0].FirstSentFrame))
	case len(after) == 1:
		parts = append(parts, fmt.Sprintf("request PSN %d (frame %d) or its ACK lost after the capture point: the capture holds it, yet it was sent again",
			after[0].PSN, after[0].FirstSentFrame))
	case len(after) > 1 && after[0].Read:
		parts = append(parts, fmt.Sprintf("at least %d READ responses lost after the capture point (first PSN %d, frame %d): the capture holds them, yet they were read again",
			len(after), after[0].PSN, after[0].FirstSentFrame))
	case len(after) > 1:
		parts = append(parts, fmt.Sprintf("at least %d requests or their ACKs lost after the capture point (first PSN %d, frame %d): the capture holds them, yet they were sent again",
			len(after), after[0].PSN, after[0].FirstSentFrame))
	}
	// Sent again on a timer with no NAK: the capture cannot tell a loss
	// after its point from an answer that came after the timer fired.
	parts = appendClause(parts, timed, func(ep Recovery) string {
		return fmt.Sprintf("request PSN %d (frame %d) sent again on a timer though the capture holds it: it or its ACK was lost after the capture point, or the ACK came after the requester's timer fired",
			ep.PSN, ep.FirstSentFrame)
	}, func(ep Recovery) string {
		return fmt.Sprintf("%d requests sent again on a timer though the capture holds them (first PSN %d, frame %d): they or their ACKs were lost after the capture point, or the ACKs came after the requester's timer fired",
			len(timed), ep.PSN, ep.FirstSentFrame)
	})
	parts = appendClause(parts, acked, func(ep Recovery) string {
		return fmt.Sprintf("request PSN %d (frame %d) sent again though the capture holds its ACK (frame %d): the ACK was lost after the capture point or came after the requester's timer fired",
			ep.PSN, ep.RewindFrame, ep.AckedFrame)
	}, func(ep Recovery) string {
		return fmt.Sprintf("%d requests sent again though the capture holds their ACKs (first PSN %d at frame %d, its ACK at frame %d): the ACKs were lost after the capture point or came after the requester's timer fired",
			len(acked), ep.PSN, ep.RewindFrame, ep.AckedFrame)
	})
	return upper(strings.Join(parts, "; "))
}

// appendClause appends to parts the clause one writes for a single
// episode, or the one many writes (given the first) for several; nothing
// for none.
func appendClause(parts []string, g []Recovery, one, many func(Recovery) string) []string {
	switch len(g) {
	case 0:
		return parts
	case 1:
		return append(parts, one(g[0]))
	}
	return append(parts, many(g[0]))
}

// timerDriven reports whether episodes of cause c start on the
// requester's timer rather than on a NAK.
func timerDriven(c Cause) bool {
	return c == CauseTimeout || c == CauseProbe || c == CauseUnknown
}

// recoverySentence groups the episodes by cause.
func recoverySentence(eps []Recovery) string {
	var parts []string
	by := map[Cause][]Recovery{}
	for _, ep := range eps {
		by[ep.Cause] = append(by[ep.Cause], ep)
	}
	for _, cause := range []Cause{CauseImpliedNAK, CauseSequenceNAK, CauseSelective, CauseRNR, CauseTimeout, CauseProbe, CauseUnknown} {
		g := by[cause]
		if len(g) == 0 {
			continue
		}
		read := g[0].Read
		resend := "resend"
		if read {
			resend = "re-read"
		}
		d := medianDuration(g)
		switch cause {
		case CauseImpliedNAK:
			parts = append(parts, fmt.Sprintf("%s after implied NAKs in %s%s", count(len(g), resend), Human(d), medianWord(g)))
		case CauseSequenceNAK:
			parts = append(parts, fmt.Sprintf("%s after PSN sequence error NAKs in %s%s", count(len(g), resend), Human(d), medianWord(g)))
		case CauseSelective:
			parts = append(parts, fmt.Sprintf("%s in %s%s", count(len(g), "selective "+resend), Human(d), medianWord(g)))
		case CauseRNR:
			parts = append(parts, fmt.Sprintf("%s (timer code %d) of %s%s", count(len(g), "RNR wait"), g[0].RNRTimer, Human(d), medianWord(g)))
		case CauseTimeout:
			if len(g) <= 3 {
				for _, ep := range g {
					parts = append(parts, fmt.Sprintf("1 ACK timeout of %s at frame %d", Human(time.Duration(ep.Silence)), ep.RewindFrame))
				}
			} else {
				parts = append(parts, fmt.Sprintf("%d ACK timeouts (silences of %s median, first at frame %d)", len(g), Human(medianSilence(g)), g[0].RewindFrame))
			}
		case CauseProbe:
			parts = append(parts, fmt.Sprintf("%s (one packet sent again, then on at the highest PSN; at %s)", count(len(g), "probe"), firstFrames(g)))
		case CauseUnknown:
			parts = append(parts, fmt.Sprintf("%s with no cause in the capture (at %s)", count(len(g), resend), firstFrames(g)))
		}
	}
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// firstFrames writes where the episodes g rewound: "frame 7" for one,
// "frames 7, 9" for more, listing the first three and how many more.
func firstFrames(g []Recovery) string {
	frames := make([]string, 0, 3)
	for _, ep := range g[:min(3, len(g))] {
		frames = append(frames, strconv.Itoa(ep.RewindFrame))
	}
	s := "frame " + strings.Join(frames, ", ")
	if len(g) > 1 {
		s = "frames " + strings.Join(frames, ", ")
	}
	if n := len(g) - len(frames); n > 0 {
		s += " and " + strconv.Itoa(n) + " more"
	}
	return s
}

// medianWord marks a duration as the median of several episodes.
func medianWord(g []Recovery) string {
	if len(g) > 1 {
		return " (median)"
	}
	return ""
}

// medianDuration is the median duration of the episodes g (median).
func medianDuration(g []Recovery) time.Duration {
	d := make([]time.Duration, len(g))
	for i, ep := range g {
		d[i] = time.Duration(ep.Duration)
	}
	slices.Sort(d)
	return median(d)
}

// medianSilence is the median silence before the episodes g (median).
func medianSilence(g []Recovery) time.Duration {
	d := make([]time.Duration, len(g))
	for i, ep := range g {
		d[i] = time.Duration(ep.Silence)
	}
	slices.Sort(d)
	return median(d)
}

// count writes "1 gap", "3 gaps", "0 PSNs", "2 re-reads", "1 RNR wait".
func count(n int, singular string) string {
	return strconv.Itoa(n) + " " + noun(n, singular)
}

// noun is singular for a count of 1 and its plural (with an s) for any
// other count.
func noun(n int, singular string) string {
	if n == 1 {
		return singular
	}
	return singular + "s"
}

func upper(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// nakName names a NAK code in words.
func nakName(c interface{ String() string }) string {
	switch c.String() {
	case "INVALID_REQ":
		return "Invalid request"
	case "REM_ACCESS_ERR":
		return "Remote access error"
	case "REM_OP_ERR":
		return "Remote operational error"
	}
	return c.String()
}

// Human writes d for a person: "140 µs", "1.3 ms", "67 ms", "2.50 s".
func Human(d time.Duration) string {
	// Each form is chosen by the value as it rounds, so a value that
	// rounds up to the next form's threshold is written in that form:
	// 9.96 µs is 10 µs, 999.6 µs is 1.0 ms, 999.6 ms is 1.00 s.
	switch {
	case d < 9950*time.Nanosecond:
		return strconv.FormatFloat(float64(d)/1e3, 'f', 1, 64) + " µs"
	case d < 999500*time.Nanosecond:
		return strconv.FormatInt(int64((d+500)/time.Microsecond), 10) + " µs"
	case d < 9950*time.Microsecond:
		return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) + " ms"
	case d < 999500*time.Microsecond:
		return strconv.FormatInt(int64((d+500*time.Microsecond)/time.Millisecond), 10) + " ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s"
}

// formatSeconds writes d in seconds, as a JSON number.
func formatSeconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}
