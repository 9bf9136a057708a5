package perftest

// The observation flags of the perftest commands: --trace FILE writes the
// devices' QP trace (rxe.Options.Trace) as JSON lines, --ladder FILE draws
// the run's connection from its capture (--pcap, or a temporary one), and
// with a capture the end-of-run summary says what went wrong (flows'
// explanation).

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/dump"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/ladder"
	"github.com/gorxe/gorxe/rxe"
)

// observe holds --trace and --ladder.
type observe struct {
	ladder string     // --ladder FILE
	trace  *traceFile // --trace FILE (nil without)
}

// traceFile is the --trace file. The copies of the options runLoopback
// makes share it, so both loopback devices trace into one file.
type traceFile struct {
	name  string
	mu    sync.Mutex
	users int // devices tracing into the file
	file  *os.File
	// buf holds the lines until closeTrace flushes it: the devices write
	// events while they hold a QP's lock, which a write(2) per event
	// would keep for the file's time.
	buf  *bufio.Writer
	sink func(rxe.TraceEvent)
	err  func() error
}

// addObserveFlags defines --trace and --ladder.
func addObserveFlags(fs *flag.FlagSet, o *options) {
	o.obs = &observe{}
	fs.Func("trace", "write each QP's events (packets, engine states, timers, retries, completions) as JSON lines to `FILE`; rxectl trace reads it", func(s string) error {
		if s == "" {
			return errors.New("want a file name")
		}
		o.obs.trace = &traceFile{name: s}
		return nil
	})
	fs.StringVar(&o.obs.ladder, "ladder", "", "draw the run's connection as a ladder diagram into `FILE` (.svg or .png), from --pcap's capture or a temporary one")
}

// traceName is the --trace file name, or "".
func (ob *observe) traceName() string {
	if ob == nil || ob.trace == nil {
		return ""
	}
	return ob.trace.name
}

// checkObserve validates --trace and --ladder.
func (o *options) checkObserve() error {
	ob := o.obs
	if ob == nil {
		return nil
	}
	if ob.ladder != "" {
		if err := cli.CheckOutputFile("--ladder", ob.ladder, ".svg", ".png"); err != nil {
			return err
		}
	}
	names := map[string]string{}
	for _, f := range []struct{ flag, name string }{{"--trace", ob.traceName()}, {"--ladder", ob.ladder}, {"--pcap", o.pcap}, {"--plot", o.plot}} {
		flag, name := f.flag, f.name
		if name == "" {
			continue
		}
		if other, ok := names[name]; ok {
			return fmt.Errorf("%s and %s name the same file", other, flag)
		}
		names[name] = flag
	}
	return nil
}

// traceSink returns the device's rxe.Options.Trace: nil without --trace.
// Each call must be matched by closeTrace once the device is closed.
func (o *options) traceSink() (func(rxe.TraceEvent), error) {
	if o.obs == nil || o.obs.trace == nil {
		return nil, nil
	}
	ob := o.obs.trace
	ob.mu.Lock()
	defer ob.mu.Unlock()
	if ob.users == 0 {
		f, err := os.Create(ob.name)
		if err != nil {
			return nil, fmt.Errorf("--trace: %w", err)
		}
		ob.file, ob.buf = f, bufio.NewWriterSize(f, 1<<20)
		ob.sink, ob.err = rxe.NewTraceWriter(ob.buf)
	}
	ob.users++
	return ob.sink, nil
}

// closeTrace ends one device's use of the trace file; the last closes it.
func (o *options) closeTrace() error {
	if o.obs == nil || o.obs.trace == nil {
		return nil
	}
	ob := o.obs.trace
	ob.mu.Lock()
	defer ob.mu.Unlock()
	if ob.users == 0 {
		return nil
	}
	if ob.users--; ob.users > 0 {
		return nil
	}
	// The devices are closed: no event comes any more.
	err := ob.err()
	if ferr := ob.buf.Flush(); err == nil {
		err = ferr
	}
	if cerr := ob.file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("--trace %s: %w", ob.name, err)
	}
	return nil
}

// capturePath is where the capture goes: --pcap, or with --ladder alone
// a temporary file (temp is then true: the caller removes it).
func (o *options) capturePath() (name string, temp bool, err error) {
	if o.pcap != "" || o.obs == nil || o.obs.ladder == "" {
		return o.pcap, false, nil
	}
	f, err := os.CreateTemp("", "rxectl-ladder-*.pcap")
	if err != nil {
		return "", false, fmt.Errorf("--ladder: a temporary capture: %w", err)
	}
	f.Close()
	return f.Name(), true, nil
}

// observeAfter runs once the devices are closed: it prints the flow
// analysis' explanation of the capture when something went wrong, and
// draws --ladder. It removes a temporary capture.
func (s *session) observeAfter(w io.Writer) error {
	if s.capName == "" {
		return nil
	}
	if s.capTemp {
		defer os.Remove(s.capName)
	}
	f, err := os.Open(s.capName)
	if err != nil {
		return err
	}
	defer f.Close()
	ports := dump.Ports{defRoCEPort}
	for _, p := range []uint16{s.dev.Addr().Port(), s.peerAddr.Port()} {
		if p != 0 && !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	pkts, err := dump.ReadPackets(f, ports)
	if err != nil && pkts == nil {
		return fmt.Errorf("reading the capture: %w", err)
	}
	an := flows.NewAnalyzer(flows.Options{})
	for _, p := range pkts {
		an.Add(p)
	}
	rep := an.Report()
	for _, c := range rep.Connections {
		for _, e := range c.Explain {
			fmt.Fprintf(w, " What went wrong (%s): %s\n", c.Title(), e)
		}
	}
	if s.o.obs == nil || s.o.obs.ladder == "" {
		return nil
	}
	d, err := ladder.FromCapture(pkts, rep, ladder.Selection{})
	if errors.Is(err, ladder.ErrNoPackets) {
		return fmt.Errorf("--ladder: the capture holds no RoCE packet")
	}
	if err == nil {
		err = ladder.Write(s.o.obs.ladder, d)
	}
	if err != nil {
		return fmt.Errorf("--ladder: %w", err)
	}
	return nil
}
