package perftest

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
	"slices"
	"strings"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/plot"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/faults"
	"github.com/gorxe/gorxe/netdev/pcapdump"
	"github.com/gorxe/gorxe/rxe"
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
	name, temp, err := s.o.capturePath()
	if err != nil {
		conn.Close()
		return nil, err
	}
	if name != "" {
		f, err := os.Create(name)
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("--pcap: %w", err)
		}
		pc, err := pcapdump.Wrap(conn, f, pcapdump.Options{SentTOS: uint8(s.o.tclass)})
		if err != nil {
			f.Close()
			conn.Close()
			return nil, fmt.Errorf("--pcap %s: %w", name, err)
		}
		s.pfile, s.pconn, conn = f, pc, pc
		s.capName, s.capTemp = name, temp
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
	unreadSockets.Add(-s.unread)
	s.unread = 0
	s.traceErr = s.o.closeTrace()
	st := &report.Final{Device: deviceStats(s), Transport: transportStats(s)}
	if s.fconn != nil {
		fs := s.faultStats()
		st.Faults = &report.Faults{Seed: s.o.seed, Rules: strings.Fields(s.o.ruleList()),
			Send: report.NewDirStats(fs.Send), Recv: report.NewDirStats(fs.Recv)}
	}
	if s.pconn != nil {
		ps := s.pconn.Stats()
		c := &report.Capture{File: s.o.pcap, Sent: ps.Sent, Received: ps.Received, Skipped: ps.Skipped, BadICRC: ps.BadICRC}
		err := s.pconn.Err()
		if cerr := s.pfile.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("pcapdump: %w", cerr)
		}
		if err != nil {
			c.Error = err.Error()
			s.capName = "" // nothing to analyse
		}
		for _, p := range []uint16{s.dev.Addr().Port(), s.peerAddr.Port()} {
			if p != 0 && p != defRoCEPort && !slices.Contains(c.Ports, p) {
				c.Ports = append(c.Ports, p)
			}
		}
		if !s.capTemp { // --ladder's own capture is not reported
			st.Capture = c
		}
	}
	s.final = st
}

// deviceStats is the device's counters.
func deviceStats(s *session) report.Device {
	c := s.dev.Counters()
	return report.Device{Name: s.dev.Name(), Addr: s.dev.Addr().String(),
		SentPkts: c.SentPkts, RcvdPkts: c.RcvdPkts, BadICRC: c.BadICRC, ICRCRecovered: c.ICRCRecovered,
		Malformed: c.Malformed, UnknownQP: c.UnknownQP, LocalDrops: c.LocalDrops, HeldDropped: c.HeldDropped, SendErr: c.SendErr, QPErrors: c.QPErrors,
		PolledPkts: c.PolledPkts, SpinPkts: c.SpinPkts,
		McastRcvd: c.McastRcvd, McastDropped: c.McastDropped, McastIgnored: c.McastIgnored}
}

// transportStats sums the QPs' counters.
func transportStats(s *session) report.Transport {
	var t report.Transport
	var loss rxe.LossCounters // summed as the device sums its QPs'
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
		rc := c.Requester.Recovery
		t.WindowDecr += rc.WindowDecr
		if t.Window == 0 || rc.Window < t.Window {
			t.Window = rc.Window
		}
		loss.Add(c.Loss())
	}
	t.SRTTMicros = loss.SRTT.Microseconds()
	t.RTOExpiries, t.IBTimeouts, t.TailProbes = loss.RTOExpiries, loss.IBTimeouts, loss.TailProbes
	t.RTODeferred, t.RTOSpurious = loss.RTODeferred, loss.RTOSpurious
	t.SRHolesReceived, t.SRPacketsResent, t.ReadHoleRereads = loss.SRHolesReceived, loss.SRPacketsResent, loss.ReadHoleRereads
	t.SRResendsLost, t.SRReadRequestsLost, t.SRReadRequestsSlow = loss.SRResendsLost, loss.SRReadRequestsLost, loss.SRReadRequestsSlow
	t.ReadResponsesResent, t.ReadRereadsLost, t.RetryDoubled = loss.ReadResponsesResent, loss.ReadRereadsLost, loss.RetryDoubled
	t.SRProgressReceived, t.SRProgressReports = loss.SRProgressReceived, loss.SRProgressReports
	t.SRHolesReported, t.SRHolePSNs, t.OOODropped = loss.SRHolesReported, loss.SRHolePSNs, loss.OOODropped
	t.OOOHeld, t.OOOPlaced, t.OOOPeak, t.OOOBytesPeak = loss.OOOHeld, loss.OOOPlaced, loss.OOOPeak, loss.OOOBytesPeak
	return t
}

// report prints what follows the tables once the run is over: the JSON
// document (--json), the plot (--plot) and, with faults or a capture, the
// statistics (on stderr, or in the JSON document). peer is the loopback
// server's session (nil otherwise). It returns runErr, or the error of
// the capture, the JSON, the plot or --out_json's file, or else the
// verifier's (-w, -y: checkLimits).
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
		s.writeStats(s.errw, peer)
	}
	if runErr != nil {
		return runErr
	}
	if c := s.final.Capture; c != nil && c.Error != "" {
		return fmt.Errorf("--pcap %s: the capture is incomplete: %s", c.File, c.Error)
	}
	if s.o.plot != "" {
		if err := plot.Write(s.o.plot, s.plotData()); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
	}
	if s.traceErr != nil {
		return s.traceErr
	}
	if err := s.observeAfter(s.errw); err != nil {
		return err
	}
	if err := s.writeOutJSON(); err != nil {
		return err
	}
	return s.checkLimits()
}

// writeStats writes the statistics of faults, devices and capture of
// this side and of the loopback peer.
func (s *session) writeStats(w io.Writer, peer *session) {
	var pf *report.Final
	if peer != nil {
		pf = peer.final
	}
	report.WriteStats(w, s.final, pf)
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
		"peer_version": s.peer.Text, "peer_rxectl": s.peer.RxeCtl, "local": s.dev.Addr().String(), "peer": s.peerAddr.String(),
		"device": s.final.Device, "transport": s.final.Transport,
		"local_drop_mode": s.o.localDropMode.String(),
		"recv_buffer":     s.bufs.Recv, "recv_buffer_capped": s.bufs.RecvCapped(),
		"peer_recv_buffer": s.peer.RecvBuffer, "recovery": s.o.recovery.String(),
		"selective_repeat": s.o.noSR.String(), "peer_selective_repeat": s.peer.SelectiveRepeat,
		"selective_repeat_used": s.srUsed(), "traffic_class": s.o.tclass,
		"post_list": s.o.postList, "use_srq": s.o.useSRQ, "recv_post_list": s.o.recvPostList, "cq_vector": s.o.cqVector, "retry_count": s.o.retryCount,
	}
	if m := s.limitsJSON(); m != nil {
		doc["limits"] = m
	}
	if m := s.o.rateJSON(); m != nil {
		doc["rate_limit"] = m
	}
	if s.o.latencyGap > 0 {
		doc["latency_gap_usec"] = s.o.latencyGap
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
		if peer.pollMode != "" {
			doc["peer_cq_polling"] = peer.pollMode
		}
	}
	if s.pollMode != "" {
		doc["cq_polling"] = s.pollMode
	}
	if s.procs != 0 {
		doc["gomaxprocs"] = s.procs
		doc["gomaxprocs_halved"] = s.procsWas != 0
	}
	if s.t.lat {
		doc["unit"] = "usec"
		doc["results"] = s.latResults
	} else {
		doc["unit"] = report.BWUnit(s.o.gbits)
		doc["results"] = s.bwResults
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

// checkInject validates --pcap and --plot.
func (o *options) checkInject(t Test) error {
	if o.plot != "" {
		if err := cli.CheckOutputFile("--plot", o.plot, ".svg", ".png"); err != nil {
			return err
		}
		switch {
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
