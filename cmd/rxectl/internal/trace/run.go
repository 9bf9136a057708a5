package trace

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/ladder"
)

// Exit statuses of Run.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// Usage writes the help of rxectl trace.
func Usage(w io.Writer) {
	fmt.Fprint(w, `usage: rxectl trace [--qp N] [--dev ADDR] [--time T1-T2] [--ladder OUT.svg|OUT.png] FILE

Trace prints a QP trace (the JSON lines --trace writes on the perftest
commands, or rxe.NewTraceWriter in a program) as a timeline: time in
seconds since the first event, device, QP, engine (requester, completer,
responder, qp) and the event: packets sent (→) and received (←) with
opcode and PSN, the state passes of the completer (rxe_comp.c COMPST_*)
and the responder (rxe_resp.c RESPST_*), timers armed and fired, retries
with their cause, completions and QP state changes.

--qp and --dev keep one QP's events, --time T1-T2 those of a window. --ladder also draws the QP (the
--qp, or the first that sent a request) as a ladder diagram: its packets as
arrows, its timers, retries, completions and states beside its lane, and
its peer's responder states beside the other lane when the trace holds
the peer's device too. Flags may come before or after FILE.

Exit status: 0 when every line of FILE is an event; 1 when FILE cannot be
read or a line is not an event (a trace whose writer was killed ends in
the middle of one: the events before that line are still shown, and
drawn); 2 for a usage error.

Flags:
`)
	fs := flags(&Filter{}, new(string))
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// flags defines the flags of rxectl trace on a new FlagSet filling f and
// out (--ladder).
func flags(f *Filter, out *string) *flag.FlagSet {
	fs := flag.NewFlagSet("trace", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(out, "ladder", "", "draw the QP as a ladder diagram into `FILE` (.svg or .png)")
	fs.StringVar(&f.Dev, "dev", "", "keep the events of the device at `ADDR` (ip:port)")
	fs.Func("qp", "keep the events of QP `N` (decimal or 0x hex)", func(s string) error {
		n, err := strconv.ParseUint(s, 0, 24)
		if err != nil {
			return errors.New("want a QP number below 2^24")
		}
		f.QPN, f.HasQPN = uint32(n), true
		return nil
	})
	fs.Func("time", "keep the events from `T1-T2` seconds after the trace's first", func(s string) error {
		lo, hi, ok := cli.CutRange(s)
		a, err1 := strconv.ParseFloat(lo, 64)
		b, err2 := strconv.ParseFloat(hi, 64)
		if !ok || err1 != nil || err2 != nil || a < 0 || b <= a {
			return errors.New("want T1-T2 in seconds, T1 < T2")
		}
		f.From, f.To = a, b
		return nil
	})
	return fs
}

// Run implements "rxectl trace [flags] FILE"; flags may also follow FILE.
func Run(args []string, stdout, stderr io.Writer) int {
	var f Filter
	var out string
	fs := flags(&f, &out)
	pos, err := cli.ParseIntermixed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		Usage(stdout)
		return exitOK
	}
	if err == nil && len(pos) != 1 {
		err = fmt.Errorf("want exactly one FILE, got %d arguments", len(pos))
	}
	if err != nil {
		fmt.Fprintf(stderr, "rxectl trace: %v\nusage: rxectl trace [--qp N] [--dev ADDR] [--time T1-T2] [--ladder OUT] FILE\n", err)
		return exitUsage
	}
	fh, err := os.Open(pos[0])
	if err != nil {
		fmt.Fprintf(stderr, "rxectl trace: %v\n", err)
		return exitFail
	}
	defer fh.Close()
	// A trace whose writer was killed ends inside a line: the events
	// before the first line that is not one are still shown, as rxectl
	// dump shows the frames before a cut record.
	evs, readErr := Read(fh)
	if readErr != nil && len(evs) == 0 {
		fmt.Fprintf(stderr, "rxectl trace: %s: %v\n", pos[0], readErr)
		return exitFail
	}
	if err := WriteTimeline(stdout, evs, f); err != nil {
		fmt.Fprintf(stderr, "rxectl trace: %v\n", err)
		return exitFail
	}
	if out != "" {
		d, err := Ladder(evs, f)
		if err == nil {
			err = ladder.Write(out, d)
		}
		if err != nil {
			fmt.Fprintf(stderr, "rxectl trace: --ladder %s: %v\n", out, err)
			return exitFail
		}
	}
	if readErr != nil {
		shown := fmt.Sprintf("the %d events before it are shown", len(evs))
		if len(evs) == 1 {
			shown = "the event before it is shown"
		}
		fmt.Fprintf(stderr, "rxectl trace: %s: %v (the trace stops there: %s)\n", pos[0], readErr, shown)
		return exitFail
	}
	return exitOK
}
