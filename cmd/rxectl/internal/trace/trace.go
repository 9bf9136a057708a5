// Package trace reads the JSON lines of an rxe trace (rxe.Options.Trace,
// rxe.NewTraceWriter, rxectl's --trace), prints them as a readable
// timeline, and turns one QP's events into a ladder diagram.
package trace

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows"
)

// Event is one line of a trace: rxe.TraceEvent as NewTraceWriter writes
// it, with T the seconds since the trace's first event.
type Event struct {
	T        float64  `json:"t"`
	Dev      string   `json:"dev"`
	QPN      uint32   `json:"qpn"`
	Ev       string   `json:"ev"`
	Engine   string   `json:"engine"`
	Op       string   `json:"op"`
	PSN      *uint32  `json:"psn"`
	Syndrome string   `json:"syndrome"`
	MSN      uint32   `json:"msn"`
	States   []string `json:"states"`
	Deadline int64    `json:"deadline_ns"`
	Cause    string   `json:"cause"`
	From     string   `json:"from"`
	To       string   `json:"to"`
	Status   string   `json:"status"`
	WCOp     string   `json:"wc_opcode"`
	WRID     uint64   `json:"wr_id"`
	// Timer and Action of a timer_fire, Resend of a retry or a send:
	// optional: a trace without them (one from an older rxectl, or a
	// program's own writer) is read, and its events printed without them.
	Timer  string `json:"timer"`
	Action string `json:"action"`
	Resend string `json:"resend"`
}

// Read reads a trace. A line that is not a JSON object, or longer than
// 1 MiB, is an error naming its line number; blank lines are skipped.
func Read(r io.Reader) ([]Event, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var out []Event
	n := 1
	for ; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var ev Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			return out, fmt.Errorf("line %d: %w", n, err)
		}
		if ev.Ev == "" {
			return out, fmt.Errorf("line %d: no \"ev\": not an rxe trace event", n)
		}
		out = append(out, ev)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("line %d: %w", n, err)
	}
	return out, nil
}

// Filter keeps the events of one QP (Dev may be empty: any device) and,
// when To is not zero, those from From to To seconds.
type Filter struct {
	Dev      string
	QPN      uint32
	HasQPN   bool
	From, To float64
}

// flags returns the filter as the trace flags that set it ("--qp 17
// --time 0.01-0.02"), or "" for none.
func (f Filter) flags() string {
	var p []string
	if f.HasQPN {
		p = append(p, fmt.Sprintf("--qp %d", f.QPN))
	}
	if f.Dev != "" {
		p = append(p, "--dev "+f.Dev)
	}
	if f.To != 0 {
		// Plain decimals, which read more easily than the exponents %g
		// writes for small times (1e-05); --time takes either.
		p = append(p, "--time "+strconv.FormatFloat(f.From, 'f', -1, 64)+"-"+strconv.FormatFloat(f.To, 'f', -1, 64))
	}
	return strings.Join(p, " ")
}

func (f Filter) keep(ev *Event) bool {
	return (!f.HasQPN || ev.QPN == f.QPN) && (f.Dev == "" || ev.Dev == f.Dev) &&
		(f.To == 0 || ev.T >= f.From && ev.T <= f.To)
}

// WriteTimeline writes the events as lines: time, device and QP, engine,
// and what happened.
func WriteTimeline(w io.Writer, evs []Event, f Filter) error {
	b := bufio.NewWriter(w)
	for i := range evs {
		ev := &evs[i]
		if !f.keep(ev) {
			continue
		}
		fmt.Fprintf(b, "%12.6f  %-21s QP %-5d %-9s  %s\n", ev.T, ev.Dev, ev.QPN, ev.Engine, describe(ev))
	}
	return b.Flush()
}

// describe says what one event is.
func describe(ev *Event) string {
	switch ev.Ev {
	case "send":
		if r := resendText(ev.Resend); r != "" {
			return "→ " + packetText(ev) + "  [resend: " + r + "]"
		}
		return "→ " + packetText(ev)
	case "recv":
		return "← " + packetText(ev)
	case "states":
		return strings.Join(ev.States, " → ")
	case "timer_arm":
		return "timer armed: fires in " + flows.Human(time.Duration(ev.Deadline))
	case "timer_fire":
		if ev.Timer == "" {
			return "timer fired"
		}
		return "timer fired (" + ev.Timer + "): " + timerAction(ev)
	case "retry":
		return "RETRY (" + ev.Cause + "): " + retryText(ev)
	case "complete":
		return fmt.Sprintf("completion %s %s wr_id %d", ev.Status, ev.WCOp, ev.WRID)
	case "qp_state":
		return "QP " + ev.From + " → " + ev.To
	}
	return ev.Ev
}

// resendText names a kind of resend (rxe.TraceEvent.Resend), "" for none.
func resendText(k string) string {
	switch k {
	case "":
		return ""
	case "go_back_n":
		return "go-back-N"
	case "rnr":
		return "RNR retry"
	case "tail_probe":
		return "tail-loss probe"
	case "double":
		return "second copy"
	case "reread":
		return "re-read"
	case "selective_repeat":
		return "selective repeat"
	}
	return k
}

// fromPSN is " from PSN 100", or "" when ev names no PSN.
func fromPSN(ev *Event) string {
	if ev.PSN == nil {
		return ""
	}
	return fmt.Sprintf(" from PSN %d", *ev.PSN)
}

// timerAction says what the requester does after a timer_fire.
func timerAction(ev *Event) string {
	switch ev.Action {
	case "none", "":
		return "nothing to send"
	case "rnr":
		return "RNR wait over, resend" + fromPSN(ev)
	case "tail_probe":
		if ev.PSN != nil {
			return fmt.Sprintf("tail-loss probe of PSN %d", *ev.PSN)
		}
		return "tail-loss probe"
	case "credit_probe":
		return "the credit probe may go"
	case "go_back_n":
		return "go back N" + fromPSN(ev)
	}
	return resendText(ev.Action) + fromPSN(ev)
}

// retryText says what a retry resends; a trace without resend fields
// had go-back-N retries only.
func retryText(ev *Event) string {
	switch ev.Resend {
	case "":
		return "go back and resend"
	case "go_back_n":
		return "go back N" + fromPSN(ev)
	case "rnr":
		return "wait " + flows.Human(time.Duration(ev.Deadline)) + ", then resend" + fromPSN(ev)
	case "reread":
		if ev.PSN == nil {
			return "re-read the missing responses"
		}
		return "re-read" + fromPSN(ev)
	case "selective_repeat":
		return "selective-repeat resend" + fromPSN(ev)
	}
	return resendText(ev.Resend) + fromPSN(ev)
}

// packetText is "RC_ACKNOWLEDGE PSN 100 (ACK unlimited, MSN 1)".
func packetText(ev *Event) string {
	s := ev.Op
	if ev.PSN != nil {
		s += fmt.Sprintf(" PSN %d", *ev.PSN)
	}
	if ev.Syndrome != "" {
		s += fmt.Sprintf(" (%s, MSN %d)", ev.Syndrome, ev.MSN)
	}
	return s
}
