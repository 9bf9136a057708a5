package report

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gorxe/gorxe/netdev/faults"
)

// Final is one side's counters after a run: what the fault injection did
// (nil without faults), the device's and the QPs' counters, and the capture
// (nil without --pcap).
type Final struct {
	Faults    *Faults
	Device    Device
	Transport Transport
	Capture   *Capture
}

// Faults is faults.Stats with the rules and the seed.
type Faults struct {
	Seed  uint64   `json:"seed"`
	Rules []string `json:"rules"`
	Send  DirStats `json:"send"`
	Recv  DirStats `json:"recv"`
}

// DirStats is faults.DirStats with JSON names.
type DirStats struct {
	Dropped    uint64 `json:"dropped"`
	Duplicated uint64 `json:"duplicated"`
	Reordered  uint64 `json:"reordered"`
	Delayed    uint64 `json:"delayed"`
	Corrupted  uint64 `json:"corrupted"`
	LocalDrops uint64 `json:"local_drops"`
	Lost       uint64 `json:"lost"`
}

// NewDirStats converts one direction of faults.Stats.
func NewDirStats(d faults.DirStats) DirStats { return DirStats(d) }

// Device is rxe.Counters with the device's name and address.
type Device struct {
	Name          string `json:"name"`
	Addr          string `json:"addr"`
	SentPkts      uint64 `json:"sent_pkts"`
	RcvdPkts      uint64 `json:"rcvd_pkts"`
	BadICRC       uint64 `json:"bad_icrc"`
	ICRCRecovered uint64 `json:"icrc_recovered"`
	Malformed     uint64 `json:"malformed"`
	UnknownQP     uint64 `json:"unknown_qp"`
	LocalDrops    uint64 `json:"local_drops"`
	// HeldDropped counts the datagrams taken back after local drops and
	// then forgotten instead of sent, by QPs in error, reset or destroyed
	// (rxe.Counters.HeldDropped; --local-drop-mode=adaptive).
	HeldDropped uint64 `json:"held_dropped"`
	SendErr     uint64 `json:"send_err"`
	QPErrors    uint64 `json:"qp_errors"`
	// PolledPkts counts the datagrams a spinning latency loop read and
	// handled itself (rxe.Counters.PolledPkts; --busy-poll).
	PolledPkts uint64 `json:"polled_pkts"`
	// SpinPkts counts the datagrams a receive goroutine read while it
	// spun after a batch (rxe.Counters.SpinPkts; --receive-spin).
	SpinPkts uint64 `json:"spin_pkts"`
	// McastRcvd counts the multicast datagrams handed to the QPs attached
	// to their group (also counted in RcvdPkts), McastDropped those that
	// found no QP attached or named another destination QP, McastIgnored those a device bound to the
	// wildcard address received on its other sockets
	// (rxe.Counters.McastRcvd, McastDropped, McastIgnored; -g).
	McastRcvd    uint64 `json:"mcast_rcvd_pkts"`
	McastDropped uint64 `json:"mcast_dropped_pkts"`
	McastIgnored uint64 `json:"mcast_ignored_pkts"`
}

// Transport sums the QPs' counters that show recovery at work.
type Transport struct {
	Retransmits      uint64 `json:"retransmits"`        // request packets sent again
	Timeouts         uint64 `json:"timeouts"`           // retransmit timer expiries
	RcvdSeqErr       uint64 `json:"rcvd_seq_err"`       // PSN sequence error NAKs received
	RcvdRNRErr       uint64 `json:"rcvd_rnr_err"`       // RNR NAKs received
	DuplicateRequest uint64 `json:"duplicate_request"`  // requests received again
	OutOfSeqRequest  uint64 `json:"out_of_seq_request"` // PSN sequence error NAKs sent
	// LocalDropRetries counts held datagrams sent again after their QP's
	// back-off (--local-drop-mode=adaptive); BackoffDelayNs is the largest
	// back-off delay a QP has at the end of the run.
	LocalDropRetries uint64 `json:"local_drop_retries"`
	BackoffDelayNs   int64  `json:"backoff_delay_ns"`
	// Loss recovery in round trips (docs/recovery.md): the largest
	// smoothed RTT of a QP, recovery timer expiries (each sends a
	// tail-loss probe), IB local ACK timeouts (the failure budget; the
	// same as Timeouts), probes sent, the smallest go-back-N window in
	// effect at the end and the times a window shrank.
	SRTTMicros  int64  `json:"srtt_us"`
	RTOExpiries uint64 `json:"rto_expiries"`
	IBTimeouts  uint64 `json:"ib_timeouts"`
	TailProbes  uint64 `json:"tail_probes"`
	// Recovery-timer expiries timed again because they fired late, and
	// those whose probe proved them spurious (retry.RecoveryTimer).
	RTODeferred uint64 `json:"rto_deferred"`
	RTOSpurious uint64 `json:"rto_spurious"`
	Window      int    `json:"window_pkts"`
	WindowDecr  uint64 `json:"window_decreases"`
	// Selective repeat (docs/recovery.md), zero when it is not in use.
	// This end's requester: hole reports received, packets resent for
	// them (READ re-reads included) and READ requests re-reading a hole
	// (go-back-N re-reads the READs with holes too, requester
	// readahead.go, so that one is not zero without selective repeat).
	SRHolesReceived uint64 `json:"sr_holes_received"`
	SRPacketsResent uint64 `json:"sr_packets_resent"`
	ReadHoleRereads uint64 `json:"read_holes_rereads"`
	// Go-back-N retries of a READ hole whose answer was found lost (a
	// response stream starting over passed the hole), asked for again at
	// once (requester replayPassedHole).
	ReadRereadsLost uint64 `json:"read_rereads_lost"`
	// Go-back-N retries started by a sequence NAK whose first packet was
	// sent twice (requester doubleResend).
	RetryDoubled uint64 `json:"retry_doubled"`
	// Resent packets still unacknowledged an RTO later, resent again.
	SRResendsLost uint64 `json:"sr_resends_lost"`
	// READ parts re-read because none of their responses followed those
	// of the requests before them (their request taken as lost).
	SRReadRequestsLost uint64 `json:"sr_read_requests_lost"`
	// Of those, the re-reads answered sooner than a round trip: the
	// request was only slow.
	SRReadRequestsSlow uint64 `json:"sr_read_requests_slow"`
	// This end's responder: READ response packets sent again for
	// duplicate READs (replays, re-reads, rewound trains), both modes.
	ReadResponsesResent uint64 `json:"read_responses_resent"`
	// Progress reports taken: how far the peer's responder has received
	// while a hole persisted.
	SRProgressReceived uint64 `json:"sr_progress_received"`
	// This end's responder: hole reports sent (re-reports included), PSNs
	// first seen missing (the packets lost on the way to it), the
	// out-of-order requests held (each waited behind a hole), the most
	// held at once and their bytes, and those dropped.
	SRHolesReported uint64 `json:"sr_holes_reported"`
	// Progress reports sent (hole reports naming no hole).
	SRProgressReports uint64 `json:"sr_progress_reports"`
	SRHolePSNs        uint64 `json:"sr_hole_psns"`
	OOOHeld           uint64 `json:"ooo_held"`
	OOOPlaced         uint64 `json:"ooo_placed"`
	OOOPeak           uint64 `json:"ooo_peak"`
	OOOBytesPeak      uint64 `json:"ooo_bytes_peak"`
	OOODropped        uint64 `json:"ooo_dropped"`
}

// Capture describes the --pcap file.
type Capture struct {
	File     string   `json:"file"`
	Sent     uint64   `json:"sent"`
	Received uint64   `json:"received"`
	Skipped  uint64   `json:"skipped"`
	BadICRC  uint64   `json:"bad_icrc_received"`
	Ports    []uint16 `json:"udp_ports,omitempty"` // RoCE ports other than 4791, for rxectl dump --port
	Error    string   `json:"error,omitempty"`
}

// DumpCommand is the rxectl dump command line that decodes the capture,
// as a POSIX shell runs it when pasted (shellWord).
func (c *Capture) DumpCommand() string {
	var b strings.Builder
	b.WriteString("rxectl dump")
	for _, p := range c.Ports {
		fmt.Fprintf(&b, " --port %d", p)
	}
	return b.String() + " " + shellWord(c.File)
}

// shellWord returns file as one word of a POSIX shell command that names
// it: as it is when it holds only characters no shell treats specially,
// else in single quotes (a quote inside closes them, is escaped and
// reopens them). A name that starts with '-' gets "./", so that rxectl
// dump does not take it for a flag.
func shellWord(file string) string {
	if strings.HasPrefix(file, "-") {
		file = "./" + file
	}
	plain := file != ""
	for _, r := range file {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r)) {
			plain = false
			break
		}
	}
	if plain {
		return file
	}
	return "'" + strings.ReplaceAll(file, "'", `'\''`) + "'"
}

// WriteStats writes the statistics of faults, devices and capture as text:
// st's, then the peer device's of a loopback run (peer may be nil).
func WriteStats(w io.Writer, st, peer *Final) {
	var b strings.Builder
	if f := st.Faults; f != nil {
		fmt.Fprintf(&b, " Faults (seed %d): %s\n", f.Seed, strings.Join(f.Rules, " "))
		dirLine := func(name string, d DirStats) {
			fmt.Fprintf(&b, "   %-9s dropped %d, duplicated %d, reordered %d, delayed %d, corrupted %d, local drops %d, lost %d\n",
				name+":", d.Dropped, d.Duplicated, d.Reordered, d.Delayed, d.Corrupted, d.LocalDrops, d.Lost)
		}
		dirLine("sent", f.Send)
		dirLine("received", f.Recv)
	}
	devLines := func(label string, st *Final) {
		d, t := st.Device, st.Transport
		fmt.Fprintf(&b, " %s %s %s: sent %s, received %d; bad ICRC %d, ICRC recovered %d, malformed %d, unknown QP %d, local drops %d, held dropped %d, send errors %d, QP errors %d\n",
			label, d.Name, d.Addr, count(d.SentPkts, "packet", "packets"), d.RcvdPkts, d.BadICRC, d.ICRCRecovered, d.Malformed, d.UnknownQP, d.LocalDrops, d.HeldDropped, d.SendErr, d.QPErrors)
		if d.McastRcvd > 0 || d.McastDropped > 0 || d.McastIgnored > 0 {
			fmt.Fprintf(&b, "   multicast: %s delivered to the groups' QPs (counted in received), %d dropped (no QP attached, or a destination QP not the multicast one), %d ignored (a wildcard device's other sockets)\n",
				count(d.McastRcvd, "datagram", "datagrams"), d.McastDropped, d.McastIgnored)
		}
		fmt.Fprintf(&b, "   transport: %s retransmitted, %s, %s and %s received; %s and %s received\n",
			count(t.Retransmits, "packet", "packets"), count(t.Timeouts, "timeout", "timeouts"),
			count(t.RcvdSeqErr, "sequence-error NAK", "sequence-error NAKs"), count(t.RcvdRNRErr, "RNR NAK", "RNR NAKs"),
			count(t.DuplicateRequest, "duplicate request", "duplicate requests"), count(t.OutOfSeqRequest, "out-of-sequence request", "out-of-sequence requests"))
		fmt.Fprintf(&b, "   recovery: srtt %d µs, %s (%s), %s; window %s, %s\n",
			t.SRTTMicros, count(t.RTOExpiries, "recovery timer expiry", "recovery timer expiries"), count(t.TailProbes, "tail probe", "tail probes"),
			count(t.IBTimeouts, "IB ACK timeout", "IB ACK timeouts"), count(t.Window, "packet", "packets"), count(t.WindowDecr, "decrease", "decreases"))
		switch {
		case t.RetryDoubled == 1:
			fmt.Fprint(&b, "   go-back-N: 1 retry sent its first packet twice\n")
		case t.RetryDoubled > 1:
			fmt.Fprintf(&b, "   go-back-N: %d retries sent their first packet twice\n", t.RetryDoubled)
		}
		sr := t.SRHolesReported > 0 || t.OOOPeak > 0 || t.SRHolesReceived > 0 || t.SRPacketsResent > 0
		if t.ReadHoleRereads > 0 && !sr {
			// Go-back-N re-reads the READs with holes as well.
			fmt.Fprintf(&b, "   READ holes re-read: %d (%d of them again because the answer was lost)\n", t.ReadHoleRereads, t.ReadRereadsLost)
		}
		if sr {
			fmt.Fprintf(&b, "   selective repeat: requester %s and %s received, %s resent, %s re-read, %s found lost; "+
				"responder %s reported, %s, %s, %s held out of order (%d of them placed on arrival), buffer peak %s (%s), %d dropped\n",
				count(t.SRHolesReceived, "hole report", "hole reports"), count(t.SRProgressReceived, "progress report", "progress reports"),
				count(t.SRPacketsResent, "packet", "packets"), count(t.ReadHoleRereads, "READ hole", "READ holes"),
				count(t.SRReadRequestsLost, "READ request", "READ requests"), count(t.SRHolesReported, "hole", "holes"),
				count(t.SRProgressReports, "progress report", "progress reports"),
				count(t.SRHolePSNs, "packet lost (seen as a hole)", "packets lost (seen as holes)"), count(t.OOOHeld, "request", "requests"),
				t.OOOPlaced, count(t.OOOPeak, "packet", "packets"), count(t.OOOBytesPeak, "byte", "bytes"), t.OOODropped)
		}
	}
	devLines("Device", st)
	if peer != nil {
		devLines("Peer device", peer)
	}
	if c := st.Capture; c != nil {
		fmt.Fprintf(&b, " Capture %s: %s (%d sent, %d received)", c.File, count(c.Sent+c.Received, "packet", "packets"), c.Sent, c.Received)
		if c.Skipped > 0 {
			fmt.Fprintf(&b, ", %d not recorded", c.Skipped)
		}
		if c.Error != "" {
			fmt.Fprintf(&b, ", stopped: %s", c.Error)
		}
		fmt.Fprintf(&b, "\n   decode with: %s\n", c.DumpCommand())
	}
	io.WriteString(w, b.String())
}

// StatusLine is the live status of a -D run on a terminal.
type StatusLine struct {
	w     io.Writer
	unit  string
	shown bool
}

// NewStatusLine returns the status line of a run printing to w in unit;
// it shows nothing unless enabled and w is a terminal.
func NewStatusLine(w io.Writer, unit string, enabled bool) *StatusLine {
	f, ok := w.(*os.File)
	if !ok || !enabled {
		return &StatusLine{}
	}
	if st, err := f.Stat(); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return &StatusLine{}
	}
	return &StatusLine{w: w, unit: unit}
}

// Show replaces the status line with r's figures so far.
func (l *StatusLine) Show(r BW) {
	if l.w == nil {
		return
	}
	fmt.Fprintf(l.w, "\r %s: %s, %.2f %s, %.6f Mpps so far ", count(r.Size, "byte", "bytes"), count(r.Iters, "iteration", "iterations"), r.Avg, l.unit, r.MsgRate)
	l.shown = true
}

// Clear erases the status line if one is shown.
func (l *StatusLine) Clear() {
	if l.shown {
		fmt.Fprintf(l.w, "\r%s\r", strings.Repeat(" ", 79))
		l.shown = false
	}
}

// count writes n and the noun that goes with it: one for a count of 1,
// many for any other count ("1 packet", "0 packets", "2 retries").
func count[N ~int | ~int64 | ~uint64](n N, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprint(n) + " " + many
}
