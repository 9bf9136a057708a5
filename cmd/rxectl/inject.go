package main

// Fault injection (--drop, --dup, --reorder, --delay, --corrupt,
// --local-drop, --seed) and packet capture (--pcap) around the RoCE
// device's netdev.Conn, and the statistics printed after a run.
//
// The device's Conn is stacked as
//
//	rxe.Device → faults.Conn → pcapdump.Conn → netdev.UDPConn
//
// so the capture shows what the network carried: a datagram the faults
// drop on send is not in it, a corrupted one is (with a bad ICRC), a
// duplicate is there twice; a datagram the faults drop or corrupt on
// receive is in it as it arrived.

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/faults"
	"github.com/gorxe/gorxe/netdev/pcapdump"
)

// faultFlags are the fault-injection flags, one per action, each taking
// the trigger and options of faults.ParseRule's grammar.
var faultFlags = []struct {
	action faults.Action
	usage  string
}{
	{faults.Drop, "drop RoCE datagrams: `RULE` is PROB (0.01, 1%) or [OPCODE]#N[-M], then ,dir=send|recv ,op=OPCODE|...; repeatable"},
	{faults.Duplicate, "deliver RoCE datagrams twice: `RULE` as for --drop; repeatable"},
	{faults.Reorder, "hold RoCE datagrams back behind later ones: `RULE` as for --drop, plus ,by=K (datagrams, default 1) ,max=DURATION (default 10ms); repeatable"},
	{faults.Delay, "delay RoCE datagrams: `RULE` as for --drop, plus ,by=DURATION (default 1ms); repeatable"},
	{faults.Corrupt, "flip one bit after the BTH of RoCE datagrams (their ICRC then fails): `RULE` as for --drop; repeatable"},
	{faults.LocalDrop, "make sends fail as a full qdisc does (ENOBUFS; the device retries): `RULE` as for --drop, sends only; repeatable"},
}

// addFaultFlags defines the fault-injection flags, --seed and --pcap.
func addFaultFlags(fs *flag.FlagSet, o *options) {
	for _, f := range faultFlags {
		fs.Var(faults.RuleFlag(f.action, &o.rules), f.action.String(), f.usage)
	}
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the fault injection's random decisions (the same seed and traffic make the same decisions)")
	fs.StringVar(&o.pcap, "pcap", "", "write every RoCE datagram this side sends and receives to `FILE` (pcap; with --loopback the client's, which is every datagram of the test)")
	fs.StringVar(&o.plot, "plot", "", "with -a: draw bandwidth or latency against message size into `FILE` (.svg or .png)")
}

// injecting reports whether this side injects faults or captures, the
// cases in which statistics are printed after the run.
func (o *options) injecting() bool { return len(o.rules) > 0 || o.pcap != "" }

// ruleList is the fault rules as the flags give them.
func (o *options) ruleList() string {
	s := make([]string, len(o.rules))
	for i, r := range o.rules {
		s[i] = r.String()
	}
	return strings.Join(s, " ")
}

// wrapConn stacks the capture and the fault injection on the device's
// netdev.Conn (see the top of this file). On error it closes conn.
func (s *session) wrapConn(conn netdev.Conn) (netdev.Conn, error) {
	if s.o.pcap != "" {
		f, err := os.Create(s.o.pcap)
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("--pcap: %w", err)
		}
		pc, err := pcapdump.Wrap(conn, f, pcapdump.Options{})
		if err != nil {
			f.Close()
			conn.Close()
			return nil, fmt.Errorf("--pcap %s: %w", s.o.pcap, err)
		}
		s.pfile, s.pconn, conn = f, pc, pc
	}
	if len(s.o.rules) > 0 {
		s.fconn = faults.Wrap(conn, faults.Config{Seed: s.o.seed, Rules: s.o.rules})
		conn = s.fconn
	}
	return conn, nil
}

// closeDevice closes the device (and with it the stacked Conns, which
// flushes the capture), closes the capture file and records the final
// statistics.
func (s *session) closeDevice() {
	if s.dev == nil {
		return
	}
	s.dev.Close()
	st := &finalStats{Device: deviceStats(s), Transport: transportStats(s)}
	if s.fconn != nil {
		fs := s.fconn.Stats()
		st.Faults = &faultsReport{Seed: s.o.seed, Rules: strings.Fields(s.o.ruleList()),
			Send: dirReport(fs.Send), Recv: dirReport(fs.Recv)}
	}
	if s.pconn != nil {
		ps := s.pconn.Stats()
		c := &captureReport{File: s.o.pcap, Sent: ps.Sent, Received: ps.Received, Skipped: ps.Skipped, BadICRC: ps.BadICRC}
		err := s.pconn.Err()
		if cerr := s.pfile.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("pcapdump: %w", cerr)
		}
		if err != nil {
			c.Error = err.Error()
		}
		for _, p := range []uint16{s.dev.Addr().Port(), s.peerAddr.Port()} {
			if p != 0 && p != defRoCEPort && !containsPort(c.Ports, p) {
				c.Ports = append(c.Ports, p)
			}
		}
		st.Capture = c
	}
	s.final = st
}

func containsPort(ps []uint16, p uint16) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// finalStats are a side's counters after the run.
type finalStats struct {
	Faults    *faultsReport
	Device    deviceReport
	Transport transportReport
	Capture   *captureReport
}

// faultsReport is faults.Stats with the rules and the seed.
type faultsReport struct {
	Seed  uint64       `json:"seed"`
	Rules []string     `json:"rules"`
	Send  dirStatsJSON `json:"send"`
	Recv  dirStatsJSON `json:"recv"`
}

// dirStatsJSON is faults.DirStats with JSON names.
type dirStatsJSON struct {
	Dropped    uint64 `json:"dropped"`
	Duplicated uint64 `json:"duplicated"`
	Reordered  uint64 `json:"reordered"`
	Delayed    uint64 `json:"delayed"`
	Corrupted  uint64 `json:"corrupted"`
	LocalDrops uint64 `json:"local_drops"`
	Lost       uint64 `json:"lost"`
}

func dirReport(d faults.DirStats) dirStatsJSON { return dirStatsJSON(d) }

// deviceReport is rxe.Counters with the device's name and address.
type deviceReport struct {
	Name          string `json:"name"`
	Addr          string `json:"addr"`
	SentPkts      uint64 `json:"sent_pkts"`
	RcvdPkts      uint64 `json:"rcvd_pkts"`
	BadICRC       uint64 `json:"bad_icrc"`
	ICRCRecovered uint64 `json:"icrc_recovered"`
	Malformed     uint64 `json:"malformed"`
	UnknownQP     uint64 `json:"unknown_qp"`
	LocalDrops    uint64 `json:"local_drops"`
	SendErr       uint64 `json:"send_err"`
	QPErrors      uint64 `json:"qp_errors"`
}

func deviceStats(s *session) deviceReport {
	c := s.dev.Counters()
	return deviceReport{Name: s.dev.Name(), Addr: s.dev.Addr().String(),
		SentPkts: c.SentPkts, RcvdPkts: c.RcvdPkts, BadICRC: c.BadICRC, ICRCRecovered: c.ICRCRecovered,
		Malformed: c.Malformed, UnknownQP: c.UnknownQP, LocalDrops: c.LocalDrops, SendErr: c.SendErr, QPErrors: c.QPErrors}
}

// transportReport sums the QPs' counters that show recovery at work.
type transportReport struct {
	Retransmits      uint64 `json:"retransmits"`        // request packets sent again
	Timeouts         uint64 `json:"timeouts"`           // retransmit timer expiries
	RcvdSeqErr       uint64 `json:"rcvd_seq_err"`       // PSN sequence error NAKs received
	RcvdRNRErr       uint64 `json:"rcvd_rnr_err"`       // RNR NAKs received
	DuplicateRequest uint64 `json:"duplicate_request"`  // requests received again
	OutOfSeqRequest  uint64 `json:"out_of_seq_request"` // PSN sequence error NAKs sent
	// LocalDropRetries counts held datagrams sent again after their QP's
	// back-off (--read-retry=adaptive); BackoffDelayNs is the largest
	// back-off delay a QP has at the end of the run (seed 002).
	LocalDropRetries uint64 `json:"local_drop_retries"`
	BackoffDelayNs   int64  `json:"backoff_delay_ns"`
}

func transportStats(s *session) transportReport {
	var t transportReport
	for _, qp := range s.qps {
		c := qp.Counters()
		t.Retransmits += c.Requester.Retransmits
		t.Timeouts += c.Requester.Timeouts
		t.RcvdSeqErr += c.Requester.RcvdSeqErr
		t.RcvdRNRErr += c.Requester.RcvdRNRErr
		t.DuplicateRequest += c.Responder.DuplicateRequest
		t.OutOfSeqRequest += c.Responder.OutOfSeqRequest
		t.LocalDropRetries += c.DropRetries
		t.BackoffDelayNs = max(t.BackoffDelayNs, c.BackoffDelay.Nanoseconds())
	}
	return t
}

// captureReport describes the --pcap file.
type captureReport struct {
	File     string   `json:"file"`
	Sent     uint64   `json:"sent"`
	Received uint64   `json:"received"`
	Skipped  uint64   `json:"skipped"`
	BadICRC  uint64   `json:"bad_icrc_received"`
	Ports    []uint16 `json:"udp_ports,omitempty"` // RoCE ports other than 4791, for rxectl dump --port
	Error    string   `json:"error,omitempty"`
}

// dumpCommand is the rxectl dump command line that decodes the capture.
func (c *captureReport) dumpCommand() string {
	var b strings.Builder
	b.WriteString("rxectl dump")
	for _, p := range c.Ports {
		fmt.Fprintf(&b, " --port %d", p)
	}
	return b.String() + " " + c.File
}

// report prints what follows the tables once the run is over: the JSON
// document (--json), the plot (--plot) and, with faults or a capture, the
// statistics (on stderr, or in the JSON document). peer is the loopback
// server's session (nil otherwise). It returns runErr, or the error of
// the capture, the JSON or the plot.
func (s *session) report(stdout io.Writer, peer *session, runErr error) error {
	if s.final == nil {
		return runErr
	}
	if runErr == nil {
		if err := s.printJSON(stdout, peer); err != nil {
			return err
		}
	}
	if s.o.injecting() && (!s.o.json || runErr != nil) {
		s.printStats(s.errw, peer)
	}
	if runErr != nil {
		return runErr
	}
	if c := s.final.Capture; c != nil && c.Error != "" {
		return fmt.Errorf("--pcap %s: the capture is incomplete: %s", c.File, c.Error)
	}
	if s.o.plot != "" {
		if err := writePlot(s.o.plot, s.plotData()); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
	}
	return nil
}

// printStats prints the statistics of faults, devices and capture.
func (s *session) printStats(w io.Writer, peer *session) {
	var b strings.Builder
	st := s.final
	if f := st.Faults; f != nil {
		fmt.Fprintf(&b, " Faults (seed %d): %s\n", f.Seed, strings.Join(f.Rules, " "))
		dirLine := func(name string, d dirStatsJSON) {
			fmt.Fprintf(&b, "   %-9s dropped %d, duplicated %d, reordered %d, delayed %d, corrupted %d, local drops %d, lost %d\n",
				name+":", d.Dropped, d.Duplicated, d.Reordered, d.Delayed, d.Corrupted, d.LocalDrops, d.Lost)
		}
		dirLine("sent", f.Send)
		dirLine("received", f.Recv)
	}
	devLines := func(label string, st *finalStats) {
		d, t := st.Device, st.Transport
		fmt.Fprintf(&b, " %s %s %s: sent %d packets, received %d; bad ICRC %d, ICRC recovered %d, malformed %d, unknown QP %d, local drops %d, send errors %d, QP errors %d\n",
			label, d.Name, d.Addr, d.SentPkts, d.RcvdPkts, d.BadICRC, d.ICRCRecovered, d.Malformed, d.UnknownQP, d.LocalDrops, d.SendErr, d.QPErrors)
		fmt.Fprintf(&b, "   transport: %d packets retransmitted, %d timeouts, %d sequence-error NAKs and %d RNR NAKs received; %d duplicate and %d out-of-sequence requests received\n",
			t.Retransmits, t.Timeouts, t.RcvdSeqErr, t.RcvdRNRErr, t.DuplicateRequest, t.OutOfSeqRequest)
	}
	devLines("Device", st)
	if peer != nil && peer.final != nil {
		devLines("Peer device", peer.final)
	}
	if c := st.Capture; c != nil {
		fmt.Fprintf(&b, " Capture %s: %d packets (%d sent, %d received)", c.File, c.Sent+c.Received, c.Sent, c.Received)
		if c.Skipped > 0 {
			fmt.Fprintf(&b, ", %d not recorded", c.Skipped)
		}
		if c.Error != "" {
			fmt.Fprintf(&b, ", stopped: %s", c.Error)
		}
		fmt.Fprintf(&b, "\n   decode with: %s\n", c.dumpCommand())
	}
	io.WriteString(w, b.String())
}

// printJSON prints the results with --json.
func (s *session) printJSON(w io.Writer, peer *session) error {
	if !s.o.json {
		return nil
	}
	role := "server"
	if s.client {
		role = "client"
	}
	doc := map[string]any{
		"test": s.testTitle(), "role": role, "mtu": s.mtu.Bytes(), "qps": s.o.qps,
		"peer_version": s.peer.text, "peer_rxectl": s.peer.rxectl, "local": s.dev.Addr().String(), "peer": s.peerAddr.String(),
		"device": s.final.Device, "transport": s.final.Transport,
		"read_retry": s.o.readRetry.String(),
	}
	if s.final.Faults != nil {
		doc["faults"] = s.final.Faults
	}
	if s.final.Capture != nil {
		doc["capture"] = s.final.Capture
	}
	if peer != nil && peer.final != nil {
		doc["peer_device"] = peer.final.Device
		doc["peer_transport"] = peer.final.Transport
	}
	if s.t.lat {
		doc["unit"] = "usec"
		doc["results"] = s.latResults
	} else {
		doc["unit"] = bwUnit(s.o.gbits)
		doc["results"] = s.bwResults
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

// checkInject validates --pcap and --plot.
func (o *options) checkInject(t ptest) error {
	if o.plot != "" {
		switch {
		case !strings.HasSuffix(strings.ToLower(o.plot), ".svg") && !strings.HasSuffix(strings.ToLower(o.plot), ".png"):
			return fmt.Errorf("--plot %q: the file name must end in .svg or .png", o.plot)
		case !o.all:
			return errors.New("--plot draws one point per message size: use it with -a")
		case o.host == "" && !o.loopback && (t.lat || t.verb != verbSend):
			return fmt.Errorf("--plot: the server of %s does not measure; draw the plot on the client", t.cmd)
		}
	}
	if o.pcap != "" && o.pcap == o.plot {
		return errors.New("--pcap and --plot name the same file")
	}
	return nil
}
