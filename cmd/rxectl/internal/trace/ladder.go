package trace

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/ladder"
)

// qpID is one QP of a trace.
type qpID struct {
	dev string
	qpn uint32
}

// ErrNoQP: the trace holds no QP that sent requests (and matches the
// filter).
var ErrNoQP = errors.New("no QP in the trace sent a request")

// Ladder draws one QP of a trace as a ladder: the QP on the left lane (its
// packets, timers, retries, completions and completer states), its peer
// on the right (the peer's responder states, when the trace holds the
// peer's device too). The QP is the filter's, or the first that sent a
// request.
func Ladder(evs []Event, f Filter) (*ladder.Diagram, error) {
	me, ok := qpID{}, false
	for i := range evs {
		ev := &evs[i]
		if ev.Ev == "send" && ev.Engine == "requester" && f.keep(ev) {
			me, ok = qpID{ev.Dev, ev.QPN}, true
			break
		}
	}
	if !ok {
		if fl := f.flags(); fl != "" {
			return nil, fmt.Errorf("%w matching %s", ErrNoQP, fl)
		}
		return nil, ErrNoQP
	}
	peer := findPeer(evs, me)
	right := "peer"
	if peer.dev != "" {
		right = fmt.Sprintf("responder %s QP %d", peer.dev, peer.qpn)
	}
	d := &ladder.Diagram{
		Title: fmt.Sprintf("rxe trace: %s QP %d", me.dev, me.qpn),
		Left:  fmt.Sprintf("requester %s QP %d", me.dev, me.qpn),
		Right: right,
	}
	base := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	var high uint32
	sent := false
	for i := range evs {
		ev := &evs[i]
		at := base.Add(time.Duration(ev.T * float64(time.Second)))
		if f.To != 0 && (ev.T < f.From || ev.T > f.To) {
			if ev.Ev == "send" && ev.Engine == "requester" && (qpID{ev.Dev, ev.QPN}) == me {
				myItem(ev, at, &high, &sent) // what was sent before the window
			}
			continue
		}
		switch (qpID{ev.Dev, ev.QPN}) {
		case me:
			if ev.Ev == "states" && ev.Engine == "completer" && attachPass(d, ev) {
				continue
			}
			if it, ok := myItem(ev, at, &high, &sent); ok {
				d.Items = append(d.Items, it)
			}
		case peer:
			if ev.Ev == "states" {
				label := ev.Engine + ": " + compact(ev.States)
				d.Items = append(d.Items, ladder.Item{Kind: ladder.Note, Dir: ladder.OnRight, Time: at, Label: label, Fold: label})
			}
		}
	}
	return d, nil
}

// attachPass writes a completer pass into the label of the response it
// processed, the diagram's last item, and reports whether it did. A
// MIDDLE response folds with its neighbours only when their passes match.
func attachPass(d *ladder.Diagram, ev *Event) bool {
	if len(d.Items) == 0 {
		return false
	}
	last := &d.Items[len(d.Items)-1]
	if last.Dir != ladder.ToLeft || strings.Contains(last.Label, " | ") {
		return false
	}
	pass := compact(ev.States)
	last.Label += " | " + pass
	if last.Fold != "" {
		last.Fold += " | " + pass
	}
	return true
}

// findPeer is the QP of another device that received a packet this QP
// sent, or the zero qpID.
func findPeer(evs []Event, me qpID) qpID {
	sent := map[string]bool{}
	for i := range evs {
		ev := &evs[i]
		if ev.Ev == "send" && (qpID{ev.Dev, ev.QPN}) == me && ev.PSN != nil {
			sent[ev.Op+"/"+strconv.FormatUint(uint64(*ev.PSN), 10)] = true
		}
	}
	for i := range evs {
		ev := &evs[i]
		if ev.Ev == "recv" && ev.Dev != me.dev && ev.PSN != nil && sent[ev.Op+"/"+strconv.FormatUint(uint64(*ev.PSN), 10)] {
			return qpID{ev.Dev, ev.QPN}
		}
	}
	return qpID{}
}

// myItem turns one event of the drawn QP into a diagram item.
func myItem(ev *Event, at time.Time, high *uint32, sent *bool) (ladder.Item, bool) {
	it := ladder.Item{Time: at, Dir: ladder.OnLeft, Kind: ladder.Note}
	switch ev.Ev {
	case "send", "recv":
		it.Label = packetLabel(ev)
		if ev.PSN != nil {
			it.PSN = *ev.PSN
		}
		if strings.Contains(ev.Op, "_MIDDLE") {
			it.Fold = shortOp(ev.Op)
		}
		if ev.Ev == "send" {
			it.Dir, it.Kind = ladder.ToRight, ladder.Request
			if ev.Engine == "requester" && ev.PSN != nil {
				if *sent && int32((*ev.PSN-*high)<<8)>>8 <= 0 {
					it.Kind = ladder.Resent
				} else {
					*high, *sent = *ev.PSN, true
				}
			}
			return it, true
		}
		it.Dir, it.Kind = ladder.ToLeft, ladder.Response
		switch {
		case strings.HasPrefix(ev.Syndrome, "RNR"):
			it.Kind = ladder.RNR
		case strings.HasPrefix(ev.Syndrome, "NAK"):
			it.Kind = ladder.NAK
		}
		return it, true
	case "timer_arm":
		it.Label = "timer armed: " + flows.Human(time.Duration(ev.Deadline))
	case "timer_fire":
		it.Kind, it.Dir, it.Label = ladder.Timeout, ladder.Across, "retransmission timer fired"
		if ev.Timer != "" && ev.Timer != "retransmit" {
			// Another requester timer: it runs no completer.
			it.Label = ev.Timer + " timer fired: " + timerAction(ev)
		}
	case "retry":
		it.Label = "retry: " + ev.Cause
		it.Kind = ladder.Resent
	case "complete":
		it.Label = fmt.Sprintf("completion %s %s (wr_id %d)", ev.Status, ev.WCOp, ev.WRID)
	case "states":
		it.Label = ev.Engine + ": " + compact(ev.States)
	case "qp_state":
		it.Label = "QP " + ev.From + " → " + ev.To
	default:
		return it, false
	}
	return it, true
}

// compact joins a pass's states, leaving out GET_*, CLEANUP and DONE,
// which every pass has, and writing a run of checks as its first and last
// ("CHK_PSN..CHK_RKEY").
func compact(states []string) string {
	var keep []string
	for i := 0; i < len(states); i++ {
		s := states[i]
		switch s {
		case "DONE", "GET_ACK", "GET_WQE", "GET_REQ", "CLEANUP":
			continue
		}
		j := i
		for j+1 < len(states) && isCheck(s) && isCheck(states[j+1]) {
			j++
		}
		if j > i+1 {
			s += ".." + states[j]
			i = j
		}
		keep = append(keep, s)
	}
	if len(keep) == 0 {
		return strings.Join(states, " ")
	}
	return strings.Join(keep, " ")
}

func isCheck(s string) bool { return strings.HasPrefix(s, "CHK_") || strings.HasPrefix(s, "CHECK_") }

func packetLabel(ev *Event) string {
	s := shortOp(ev.Op)
	if ev.PSN != nil {
		s += " " + strconv.FormatUint(uint64(*ev.PSN), 10)
	}
	if ev.Syndrome != "" {
		if strings.HasPrefix(ev.Syndrome, "ACK") {
			s += " MSN " + strconv.FormatUint(uint64(ev.MSN), 10)
		} else {
			s += " " + ev.Syndrome
		}
	}
	return s
}

func shortOp(op string) string {
	return strings.Replace(strings.TrimPrefix(op, "RC_"), "RDMA_", "", 1)
}
