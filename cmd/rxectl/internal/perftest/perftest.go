// Package perftest is rxectl's perftest-compatible subcommands: read-bw,
// write-bw, send-bw, atomic-bw, read-lat, write-lat, send-lat and
// atomic-lat. Flags, defaults and their dependencies are perftest's
// (protocol reference §5.1; perftest_parameters.c: init_perftest_params,
// force_dependecies); the exchange is package oob's, the tables package
// report's.
package perftest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/oob"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
	"github.com/gorxe/gorxe/netdev/faults"
	"github.com/gorxe/gorxe/rxe"
)

// verb is perftest's VerbType (the operations we support).
type verb int

const (
	verbSend verb = iota
	verbWrite
	verbRead
	verbAtomic
)

// title is perftest's testsStr entry.
func (v verb) title() string {
	return [...]string{"Send", "RDMA_Write", "RDMA_Read", "Atomic"}[v]
}

// Test is one perftest-style subcommand.
type Test struct {
	cmd  string // subcommand name
	verb verb
	lat  bool // latency test (else bandwidth)
}

// perftestName is the perftest program the subcommand mirrors.
func (t Test) perftestName() string { return "ib_" + strings.ReplaceAll(t.cmd, "-", "_") }

// Tests are the perftest-style subcommands in the order rxectl lists them.
var Tests = []Test{
	{"read-bw", verbRead, false},
	{"write-bw", verbWrite, false},
	{"send-bw", verbSend, false},
	{"atomic-bw", verbAtomic, false},
	{"read-lat", verbRead, true},
	{"write-lat", verbWrite, true},
	{"send-lat", verbSend, true},
	{"atomic-lat", verbAtomic, true},
}

// Name is the subcommand's name, e.g. "read-bw".
func (t Test) Name() string { return t.cmd }

// Summary is the subcommand's line in rxectl's command list.
func (t Test) Summary() string {
	kind := "bandwidth"
	if t.lat {
		kind = "latency"
	}
	return fmt.Sprintf("perftest's %s: %s %s test, server or client", t.perftestName(), t.verb.title(), kind)
}

// Defaults (perftest_parameters.h).
const (
	defOOBPort    = 18515
	defRoCEPort   = 4791
	defIters      = 1000
	defItersWB    = 5000 // write BW
	defSizeBW     = 65536
	defSizeLat    = 2
	defSizeAtomic = 8
	defTxBW       = 128
	defTxLat      = 1
	defRxSend     = 512
	defRxRDMA     = 1
	defCQMod      = 100
	defQPTimeout  = 14
	maxAllSize    = 8 << 20 // -a runs 2 .. 2^23
	minIters      = 5
	maxIters      = 1 << 28 // two 8-byte timestamps an iteration: 4 GiB

	// defBusyPoll is how long a latency test spins on its CQ per
	// completion before it sleeps in CQ.Wait, unless --busy-poll or -e
	// says otherwise (latwait.go: by default only where the spinner reads
	// the socket itself).
	defBusyPoll = time.Second

	// defLossWait is how long a UC or UD latency test waits for the
	// peer's next message before it ends the run as lost (--loss-wait).
	defLossWait = time.Second
)

// options are a test's settings after perftest's dependencies are applied.
type options struct {
	size           int
	all            bool
	iters          int
	mtu            int // bytes; 0: the port's active MTU
	txDepth        int
	rxDepth        int
	cqMod          int
	qps            int
	outs           int  // 0: the device maximum
	outsCapped     bool // -o was above the device maximum (outReadsNote)
	noPeak         bool
	cqModWarn      bool // -Q above 1 with messages above 8 KiB: perftest warns (parseNotes)
	peakWarn       bool // the peak was turned off by perftest's rules, not -N: perftest warns (parseNotes)
	dynPollOff     bool // perftest's rules turn its dynamic CQE polling off: it says so (parseNotes) and its header gives the fixed batch (cqePollBatch)
	gbits          bool
	timeout        int
	oobPort        int
	bind           string
	udpPort        int
	loopback       bool
	json           bool
	output         string
	atomicType     string
	duration       int
	margin         int
	infinitely     bool
	devName        string
	gidIndex       int
	cpuFreqWarn    bool // -F: accepted for compatibility (no cpufreq warning here)
	ibPort         int
	events         bool            // -e: sleep on CQ notifications instead of polling
	busyPoll       time.Duration   // --busy-poll: latency tests spin on CQ.Poll this long per wait
	lossWait       time.Duration   // --loss-wait: a UC/UD latency test's bound on a wait for the peer's message
	tclass         int             // -T, --tclass: the devices' rxe.Options.TrafficClass
	postList       int             // -l: work requests posted per PostSend call (bandwidth tests)
	recvPostList   int             // --recv_post_list: receives posted per PostRecv call (bandwidth SEND tests)
	useSRQ         bool            // --use-srq: the receiving end's QPs share one SRQ (SEND tests)
	cqVector       int             // -X: the completion vector of every CQ (-1: each QP's least-used)
	reportCounters string          // -W: the counters to report after each row (reportcounters.go)
	counterList    []reportCounter // -W parsed
	histogram      bool            // -H: print the sorted samples before a latency row
	unsorted       bool            // -U: print the samples in the order measured before a latency row
	inline         int             // -I: post SEND/WRITE inline up to this size
	limitBW        float64         // -w: the bandwidth a run must reach (ratelimit.go)
	limitMsgRate   float64         // -y: the message rate (Mpps) a run must reach
	rateLimit      float64         // --rate_limit: pace the client's posts (ratelimit.go)
	rateUnits      rateUnitsFlag   // --rate_units: M, g or p
	rateType       rateTypeFlag    // --rate_limit_type: SW only
	burstSize      int             // --burst_size: messages a paced burst posts (0: the tx depth)
	latencyGap     int             // --latency_gap: µs waited before each latency post
	retryCount     int             // --retry_count: the QPs' retry_cnt
	cpuUtil        bool            // --cpu_util: the processors' use in a -D run's sample window (cpuutil.go)
	cpuUtilWarn    bool            // --cpu_util without -D: off, with perftest's warning (cpuUtilNote)
	outJSON        bool            // --out_json: write perftest's JSON report file (outjson.go)
	outJSONFile    string          // --out_json_file: its name
	connType       string          // -c
	udMTU          int             // -c UD: the path MTU in bytes, the largest message (set by the session)
	ipv6           bool            // --ipv6: IPv6 GIDs
	oldPostSend    bool            // --use_old_post_send: the header's "ibv_wr* API : OFF" (gorxe has one way to post)
	noPCIeRO       bool            // --disable_pcie_relaxed: the header's "PCIe relax order: OFF" (no PCIe here)
	noLock         bool            // --no_lock: the header's "Lock-free : ON"
	bidir          bool            // -b
	mcg            bool            // -g: send-bw's server, both ends of send-lat, attach their QP to a multicast group, the other end sends to it (mcast.go)
	mgid           string          // -M: the group's GID (perftest's 16 bytes, or an IP address)
	mgidAddr       netip.Addr      // -M parsed (checkMcast); invalid without -M
	host           string
	rdmaCM         bool // -R: connect the QPs and run the exchange over rdma_cm (rdmacm.go)

	rules         []faults.Rule     // --drop, --dup, --reorder, --delay, --corrupt, --local-drop
	localDropMode rxe.LocalDropMode // --local-drop-mode: the devices' rxe.Options.LocalDropMode
	noGSO         bool              // --gso=off: the devices' rxe.Options.NoGSO
	noForce       bool              // --no-force-buffers: ask for socket buffers as without CAP_NET_ADMIN
	receiveSpin   time.Duration     // --receive-spin: the devices' rxe.Options.ReceiveSpin (0: off)
	recovery      recoveryFlag      // --recovery
	noSR          srOffFlag         // --selective-repeat=off
	seed          uint64            // --seed
	pcap          string            // --pcap FILE
	plot          string            // --plot FILE
	obs           *observe          // --trace, --ladder (observe.go)

	set map[string]bool // flags given on the command line (long names)

	// stderr receives the statistics after a run with faults or a
	// capture and the run's notes (nil: discarded).
	stderr io.Writer
	// capWarn says once per run (a --loopback run opens two devices)
	// that the kernel capped the socket buffers (nil: on stderr, once per
	// session).
	capWarn *capWarner
	hooks   hooks
}

// hooks are what a test, or runLoopback, changes in how a session runs.
type hooks struct {
	// pipe, when set, makes the message pipe over the exchange's TCP
	// connection (default oob.NewTCPPipe).
	pipe func(net.Conn) oob.Pipe
	// held, when set, receives the session instead of the session
	// printing its JSON, plot and statistics itself.
	held **session
	// setupTimeout, when set, replaces defSetupTimeout.
	setupTimeout time.Duration
	// silence, when set, replaces stallTimeout as silentPipe's bound and
	// cmSilence as an -R session's (cmState.silence).
	silence time.Duration
	// cmExchangeUp, when set, is called on an -R end with the exchange's
	// rdma_cm connection once it is up, before the end sends or receives
	// on it.
	cmExchangeUp func(*rxe.CMConn)
	// cmListening, when set, is called on an -R server with its device
	// once it listens for the test QPs' connections, before it tells its
	// client so.
	cmListening func(*rxe.Device)
	// sent, when set, is called by a bandwidth client (runBWClient,
	// runBWClientDuration) after each of its waits on the send CQs with
	// the number of completions the wait took, once it has accounted for
	// them and before it reads the clock that places them in the -D
	// sample window.
	sent func(n int)
	// connected, when set, is called on an end with its session once its
	// QPs (and SRQ) are connected and the remote addresses exchanged
	// (connectAndPrint), before the exchange after which its peer sends.
	connected func(*session)
	// now, when set, replaces time.Now as the clock of a bandwidth
	// client's duration run (runBWClientDuration: its start, its sample
	// window, its end and its status line) and of send-bw's server in
	// iterations mode (receiveBW: its first and last receives).
	now func() time.Time
}

// defSetupTimeout bounds the first exchanges of a TCP session (versions,
// system data, MTU): how long a peer that connected may stay silent.
const defSetupTimeout = 60 * time.Second

// marginValue is -f's value: whole seconds, -1 while unset (perftest's
// DEF_INIT_MARGIN, which force_dependecies turns into a quarter of -D).
// Its String shows the unset value as 0, so that the help gives the
// default as its usage states it, not as a -1 the command line refuses.
type marginValue int

// String returns the margin in seconds, 0 while unset.
func (m *marginValue) String() string {
	if m == nil || *m < 0 {
		return "0"
	}
	return strconv.Itoa(int(*m))
}

// Set parses a number of seconds; checkDuration refuses a negative one.
func (m *marginValue) Set(s string) error {
	v, err := strconv.ParseInt(s, 0, strconv.IntSize)
	if err != nil {
		return errors.New("a whole number of seconds")
	}
	*m = marginValue(v)
	return nil
}

func perftestFlags(t Test, o *options) *flag.FlagSet {
	fs := flag.NewFlagSet(t.cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	both := func(p *int, short, long string, def int, usage string) {
		fs.IntVar(p, short, def, usage)
		fs.IntVar(p, long, def, usage)
	}
	bothBool := func(p *bool, short, long, usage string) {
		fs.BoolVar(p, short, false, usage)
		fs.BoolVar(p, long, false, usage)
	}
	defSize, defIt, defTx, defRx := defSizeBW, defIters, defTxBW, defRxRDMA
	if t.lat {
		defSize, defTx = defSizeLat, defTxLat
	}
	if t.verb == verbAtomic {
		defSize = defSizeAtomic
	}
	if t.verb == verbWrite && !t.lat {
		defIt = defItersWB
	}
	if t.verb == verbSend {
		defRx = defRxSend
	}
	o.size = defSize
	fs.Var((*sizeFlag)(&o.size), "s", "message size in `bytes`, or with a K or M suffix in KiB or MiB as perftest's -s 64K (same on both sides)")
	fs.Var((*sizeFlag)(&o.size), "size", "message size in `bytes`, or with a K or M suffix in KiB or MiB as perftest's -s 64K (same on both sides)")
	bothBool(&o.all, "a", "all", "run sizes 2 B to 8 MiB (same on both sides)")
	both(&o.iters, "n", "iters", defIt, "iterations, at least 5 (same on both sides)")
	both(&o.mtu, "m", "mtu", 0, "path MTU: 256, 512, 1024, 2048 or 4096, at most the port's active MTU (above it, or any other value, gives the active MTU, with a note); the smaller of both sides' is used (default: the port's active MTU)")
	both(&o.txDepth, "t", "tx-depth", defTx, "send queue depth (clipped to the iterations)")
	both(&o.rxDepth, "r", "rx-depth", defRx, "receive queue depth (send tests)")
	both(&o.cqMod, "Q", "cq-mod", defCQMod, "signal every Nth work request (1 above 8 KiB unless given, or with -a, -e or -c UD, as perftest)")
	both(&o.qps, "q", "qp", 1, "number of QPs (bandwidth tests; same on both sides)")
	fs.StringVar(&o.reportCounters, "W", "", "after each row, how much each of these counters moved, comma-separated, as perftest's -W (e.g. hw_counters/rcvd_seq_err,counters/port_xmit_packets): hw_counters/ takes kernel rxe's names and gorxe's (docs/api.md, \"Counters\"), counters/ port_xmit_packets and port_rcv_packets")
	fs.StringVar(&o.reportCounters, "report-counters", "", "the long name of -W")
	both(&o.cqVector, "X", "vector", -1, "put every CQ on this completion vector, as perftest does (default: each QP's CQs on the device's least-used vector, so that -q QPs use every processor)")
	fs.IntVar(&o.recvPostList, "recv_post_list", 1, "SEND bandwidth tests: the end that receives posts its receives N at a time, in one PostRecv call (rxe.QP.PostRecv takes a list), once N of a QP's have completed; -n must be a multiple of N and -r (per QP with --use-srq) at least N")
	fs.BoolVar(&o.useSRQ, "use-srq", false, "SEND tests: the QPs of the end that receives take their receives from one shared receive queue of -r WQEs (rxe.SRQ), as perftest's --use-srq")
	both(&o.postList, "l", "post_list", 1, "bandwidth tests: post N work requests per PostSend call, a whole list at a time; -Q defaults to N and must divide it, and -n must be a multiple of it")
	both(&o.outs, "o", "outs", 0, "read and atomic tests: outstanding READs/atomics this side's responder accepts; the server's value is the client's max_rd_atomic (default, and for 0 or less: the device maximum, 128; above it the maximum, as perftest)")
	bothBool(&o.noPeak, "N", "noPeak", "do not compute the peak bandwidth")
	fs.BoolVar(&o.gbits, "report_gbits", false, "report Gb/s (10^9 bit/s) instead of MiB/s (same on both sides)")
	both(&o.timeout, "u", "qp-timeout", defQPTimeout, "local ACK timeout exponent: 4.096 us * 2^N")
	both(&o.oobPort, "p", "port", defOOBPort, "TCP port of the out-of-band exchange (same on both sides)")
	fs.StringVar(&o.bind, "bind", "", "local IP address for RoCE (default: the address the out-of-band TCP connection uses locally)")
	fs.IntVar(&o.udpPort, "udp-port", defRoCEPort, "local RoCE UDP port; perftest peers always use 4791 (0: ephemeral, rxectl peers only)")
	fs.BoolVar(&o.loopback, "loopback", false, "run server and client in this process (127.0.0.1 and 127.0.0.2; with --ipv6 both on ::1, the client on another UDP port), printing the client's side")
	fs.BoolVar(&o.json, "json", false, "print the results as JSON")
	fs.BoolVar(&o.outJSON, "out_json", false, "also write perftest's JSON report file (--out_json_file; the test's information and the last row's results, as perftest writes it): scripts that read perftest's file read rxectl's; --json prints rxectl's fuller document on standard output")
	fs.StringVar(&o.outJSONFile, "out_json_file", defOutJSONFile, "the `file` --out_json writes")
	fs.StringVar(&o.output, "output", "", "print one figure only: bandwidth, message_rate (BW tests) or latency (LAT tests)")
	both(&o.duration, "D", "duration", 0, "run for N seconds instead of -n iterations (same on both sides)")
	o.margin = -1
	for _, name := range []string{"f", "margin"} {
		fs.Var((*marginValue)(&o.margin), name, "with -D: `seconds` of warm-up and cool-down left out of the measurement (default: duration/4)")
	}
	fs.BoolVar(&o.infinitely, "run_infinitely", false, "run until interrupted, printing a row every -D seconds (default 5)")
	if t.verb == verbAtomic {
		fs.StringVar(&o.atomicType, "A", "FETCH_AND_ADD", "atomic operation: FETCH_AND_ADD or CMP_AND_SWAP")
		fs.StringVar(&o.atomicType, "atomic_type", "FETCH_AND_ADD", "atomic operation: FETCH_AND_ADD or CMP_AND_SWAP")
	}
	fs.StringVar(&o.devName, "d", devName, "RDMA device: rxectl's one device is "+devName)
	fs.StringVar(&o.devName, "ib-dev", devName, "RDMA device: rxectl's one device is "+devName)
	both(&o.gidIndex, "x", "gid-index", 0, "GID index: a gorxe device has one GID (its IP address) at index 0")
	bothBool(&o.cpuFreqWarn, "F", "CPU-freq", "accepted for perftest compatibility, a no-op: rxectl has no cpufreq warning to suppress")
	both(&o.ibPort, "i", "ib-port", 1, "device port: a gorxe device has port 1 only")
	bothBool(&o.events, "e", "events", "sleep on CQ events (notifications on a completion channel) instead of polling")
	fs.DurationVar(&o.busyPoll, "busy-poll", defBusyPoll, "latency tests: spin on the CQ (CQ.BusyPoll, which reads the socket on the spinning goroutine) up to this long per completion, as perftest spins on ibv_poll_cq, before sleeping in CQ.Wait (0: sleep at once; -e sleeps on the completion channel instead; by default no spin while a device of the process has sockets no spinner reads: with --pcap or --ladder, or --dup, --reorder or --delay rules on received packets; the server of read-lat and atomic-lat spins reading its socket and answers there)")
	if t.lat {
		// perftest's long option for -H is spelt "report-histogrm"; its
		// help says --report-histogram. Both are taken.
		const hUsage = "print every sample (µs) sorted, as \"i, t\" lines after \"#, usec\", before the size's row: the samples the statistics use (iteration runs only)"
		bothBool(&o.histogram, "H", "report-histogram", hUsage)
		fs.BoolVar(&o.histogram, "report-histogrm", false, hUsage)
		bothBool(&o.unsorted, "U", "report-unsorted", "print every sample (µs) in the order measured, as \"i, t\" lines after \"#, usec\", before the size's row (iteration runs only)")
		fs.DurationVar(&o.lossWait, "loss-wait", defLossWait, "-c UC and UD latency tests: how long to wait for the peer's next SEND or WRITE before ending the run with an error (nothing resends a message lost on an unreliable transport; RC waits up to 60 s for a peer that stopped)")
	}
	both(&o.inline, "I", "inline_size", 0, fmt.Sprintf("post SEND and WRITE messages of up to N bytes inline, N at most %d (not for the read and atomic tests, as in perftest)", maxInline))
	both2 := func(p *string, short, long, def, usage string) {
		fs.StringVar(p, short, def, usage)
		fs.StringVar(p, long, def, usage)
	}
	both2(&o.connType, "c", "connection", "RC", "connection type: RC, UC for the write and send tests, UD for the send tests (XRC, DC and SRD are not supported yet) (same on both sides)")
	bothBool(&o.rdmaCM, "R", "rdma_cm", "connect the QPs with the RDMA connection manager and run the exchange over an rdma_cm connection, as perftest -R (RDMA CM port: -p; same on both sides)")
	// perftest's -T sets an rdma_cm QP's TOS (with -R only) and --tclass
	// the GRH traffic class of the QP's address; RoCEv2 sends both as the
	// IP traffic class byte, which rxectl sets for the whole device.
	const tcUsage = "the IP traffic class byte (IPv4 TOS, IPv6 Traffic Class: DSCP << 2 | ECN, 0-255) of every RoCE packet this side sends, as perftest's -T and --tclass set it (e.g. 106: DSCP 26 with ECN capable, a common lossless RoCE class)"
	both(&o.tclass, "T", "tos", 0, tcUsage)
	fs.IntVar(&o.tclass, "tclass", 0, tcUsage)
	fs.BoolVar(&o.oldPostSend, "use_old_post_send", false, "accepted for perftest compatibility: the header says \"ibv_wr* API : OFF\" (gorxe has one way to post)")
	fs.BoolVar(&o.noPCIeRO, "disable_pcie_relaxed", false, "accepted for perftest compatibility: the header says \"PCIe relax order: OFF\" (gorxe's memory is not behind PCIe)")
	fs.BoolVar(&o.noLock, "no_lock", false, "accepted for perftest compatibility: the header says \"Lock-free : ON\"")
	fs.BoolVar(&o.ipv6, "ipv6", false, "use an IPv6 GID: RoCE over IPv6 (--bind an IPv6 address, or reach HOST over IPv6; --loopback uses ::1)")
	if !t.lat {
		bothBool(&o.bidir, "b", "bidirectional", "both sides send at once (same on both sides)")
	}
	if t.verb == verbSend {
		bothBool(&o.mcg, "g", "mcg", "multicast: send-bw's server, and both ends of send-lat, attach their UD QP to a multicast group, to which the other end sends (-c UD implied; one QP; same on both sides)")
		both2(&o.mgid, "M", "MGID", "", "with -g: the group's GID, as perftest's 16 colon-separated bytes (e.g. 0:0:0:0:0:0:0:0:0:0:255:255:239:1:1:1) or an IP address (239.1.1.1, ff0e::1); default perftest's IPv6 MGID ff01:0:2:c985::, which needs an IPv6 device (--ipv6)")
	}
	fs.BoolVar(&o.noForce, "no-force-buffers", false, "ask for the socket buffers without SO_RCVBUFFORCE/SO_SNDBUFFORCE, as a user without CAP_NET_ADMIN must: the kernel caps them at net.core.rmem_max/wmem_max")
	fs.Var(&o.recovery, "recovery", "loss recovery: on (round trips: RTT-based recovery timer, tail-loss probe, adaptive window), fixed-window (the same with the fixed 128-PSN window) or off (the IB ACK timeout only, as kernel rxe) (default on)")
	fs.Var(&o.noSR, "selective-repeat", "on: offer selective repeat to an rxectl peer (used only if it offers it too: it resends only the lost packets, docs/recovery.md); off: offer nothing, the go-back-N wire a kernel-rxe or perftest peer gets (default on)")
	ldm := (*localDropModeFlag)(&o.localDropMode)
	fs.Var(ldm, "local-drop-mode", "what the device does with a datagram the local host refuses (a local drop: ENOBUFS from a full qdisc): adaptive (hold it and send it again after the QP's local-drop back-off), timeout (discard it; the requester's ACK timeout recovers) or spin (retry at once in a busy loop, for comparison) (default adaptive)")
	fs.Var(ldm, "read-retry", "another name for --local-drop-mode")
	fs.DurationVar(&o.receiveSpin, "receive-spin", rxe.DefaultReceiveSpin, "how long a receive goroutine keeps reading its socket after a batch before it blocks, during loss recovery and with socket buffers too small for a 128-PSN window (0: it blocks at once); on a VM an idle processor takes tens of µs to wake for the next datagram (docs/performance.md, \"A receive goroutine that spins before it blocks\")")
	fs.Var((*gsoFlag)(&o.noGSO), "gso", "on: send runs of equal-size packets to the peer as UDP GSO buffers and receive with UDP GRO (the kernel segments them; a capture on this host shows the unsegmented buffers); off: one datagram per packet, as kernel rxe sends (capture with --gso=off for Wireshark) (default on)")
	addRateFlags(fs, t, o)
	addFaultFlags(fs, o)
	addObserveFlags(fs, o)
	return fs
}

// addRateFlags adds perftest's verifier limits (-w, -y), its software
// rate limiter (--rate_limit, --rate_units, --rate_limit_type,
// --burst_size), --latency_gap, --retry_count and --cpu_util.
func addRateFlags(fs *flag.FlagSet, t Test, o *options) {
	if !t.lat {
		bw := "fail the run (exit status 1) unless a row's average bandwidth reaches `limit`, in the rows' unit (MiB/s, or Gb/s with --report_gbits), as perftest's verifier limit"
		fs.Float64Var(&o.limitBW, "w", 0, bw)
		fs.Float64Var(&o.limitBW, "limit_bw", 0, bw)
		mr := "fail the run (exit status 1) unless a row's message rate reaches `limit` Mpps, as perftest's verifier limit"
		fs.Float64Var(&o.limitMsgRate, "y", 0, mr)
		fs.Float64Var(&o.limitMsgRate, "limit_msgrate", 0, mr)
		fs.Float64Var(&o.rateLimit, "rate_limit", 0, "pace the posts to at most `rate` (in --rate_units) with perftest's software rate limiter: bursts of --burst_size messages, each started once the one before is as old as the rate allows (an average: a late burst is followed by the next one sooner)")
		fs.Var(&o.rateUnits, "rate_units", "the units of --rate_limit: M (MiB/s), g (Gb/s) or p (messages per second) (default g)")
		fs.Var(&o.rateType, "rate_limit_type", "the rate limiter: SW, rxectl's own (the default here; perftest's default, HW, is a NIC's limiter, which gorxe does not have)")
		fs.IntVar(&o.burstSize, "burst_size", 0, "messages posted per burst of --rate_limit (default: the tx depth)")
	} else {
		fs.IntVar(&o.latencyGap, "latency_gap", 0, "wait `usec` microseconds (at most 1 s) before each post, as perftest's --latency_gap; as in perftest the samples, which time one post to the next, include it")
	}
	fs.BoolVar(&o.cpuUtil, "cpu_util", false, "with -D: add the column CPU_Util[%], the share of the host's processor time spent running (user, nice, system, irq and softirq; perftest counts user time only) in the sample window, and with --json this process's processor seconds in it")
	fs.IntVar(&o.retryCount, "retry_count", defRetryCount, "the QPs' retry count (retry_cnt, 0-7): how many times a request is sent again after the local ACK timeout before the QP fails with RETRY_EXC_ERR (perftest sets it with -R only; rxectl with and without)")
}

// sizeFlag is -s: a number of bytes (decimal, or 0x hex as Go's int
// flags take it), or of KiB or MiB with a K or M suffix (perftest's -s
// 64K, 1M).
type sizeFlag int

// String is the size in bytes.
func (f *sizeFlag) String() string {
	if f == nil {
		return "0"
	}
	return strconv.Itoa(int(*f))
}

// Set parses a size with an optional K or M suffix.
func (f *sizeFlag) Set(v string) error {
	unit := int64(1)
	switch {
	case strings.HasSuffix(v, "K"):
		v, unit = strings.TrimSuffix(v, "K"), 1<<10
	case strings.HasSuffix(v, "M"):
		v, unit = strings.TrimSuffix(v, "M"), 1<<20
	}
	n, err := strconv.ParseInt(v, 0, 64)
	if err != nil {
		return errors.New("want a number of bytes, or of KiB or MiB with a K or M suffix")
	}
	if n > math.MaxInt/unit || n < math.MinInt/unit {
		return errors.New("out of range")
	}
	*f = sizeFlag(n * unit)
	return nil
}

// gsoFlag is --gso: on or off, stored as rxe.Options.NoGSO.
type gsoFlag bool

// String is "on" or "off".
func (f *gsoFlag) String() string {
	if f != nil && *f {
		return "off"
	}
	return "on"
}

// Set accepts on or off.
func (f *gsoFlag) Set(v string) error {
	switch v {
	case "on":
		*f = false
	case "off":
		*f = true
	default:
		return fmt.Errorf("--gso: %q is not on or off", v)
	}
	return nil
}

// localDropModeFlag is --local-drop-mode (also --read-retry):
// rxe.LocalDropMode by its String name.
type localDropModeFlag rxe.LocalDropMode

// localDropModes are the --local-drop-mode values.
var localDropModes = []rxe.LocalDropMode{rxe.LocalDropAdaptive, rxe.LocalDropTimeout, rxe.LocalDropSpin}

// String is the mode's name.
func (f *localDropModeFlag) String() string { return rxe.LocalDropMode(*f).String() }

// Set accepts adaptive, timeout or spin.
func (f *localDropModeFlag) Set(v string) error {
	for _, m := range localDropModes {
		if v == m.String() {
			*f = localDropModeFlag(m)
			return nil
		}
	}
	return fmt.Errorf("%q: adaptive, timeout or spin", v)
}

// longNames maps short flags to their long names for options.set.
var longNames = map[string]string{
	"s": "size", "a": "all", "n": "iters", "m": "mtu", "t": "tx-depth", "r": "rx-depth", "Q": "cq-mod",
	"q": "qp", "o": "outs", "N": "noPeak", "u": "qp-timeout", "p": "port", "D": "duration", "f": "margin",
	"A": "atomic_type", "d": "ib-dev", "x": "gid-index", "F": "CPU-freq", "i": "ib-port",
	"e": "events", "I": "inline_size", "c": "connection", "b": "bidirectional", "R": "rdma_cm",
	"T": "tos", "l": "post_list", "H": "report-histogram", "report-histogrm": "report-histogram", "U": "report-unsorted",
	"w": "limit_bw", "y": "limit_msgrate", "X": "vector", "W": "report-counters", "g": "mcg", "M": "MGID",
}

// devName is the name of rxectl's device (perftest's -d).
const devName = "rxe0"

// maxInline is the device's max_inline_data (-I).
const maxInline = 400

// Usage writes the subcommand's help.
func (t Test) Usage(w io.Writer) {
	fmt.Fprintf(w, "usage: rxectl %s [flags] [HOST]\n\n", t.cmd)
	kind := "bandwidth"
	if t.lat {
		kind = "latency"
	}
	fmt.Fprintf(w, "Measures %s %s like perftest's %s, with its flags, tables and out-of-band\n", t.verb.title(), kind, t.perftestName())
	fmt.Fprintf(w, "exchange: without HOST it is the server (it waits on TCP port -p for one client),\n")
	fmt.Fprintf(w, "with HOST the client. Either end may be real perftest (RoCE on UDP port 4791).\n")
	fmt.Fprintf(w, "With --loopback, server and client run in this process on 127.0.0.1 and 127.0.0.2.\n")
	fmt.Fprintf(w, "\n--drop, --dup, --reorder, --delay, --corrupt and --local-drop inject seeded faults\n")
	fmt.Fprintf(w, "into this side's RoCE datagrams (RULE: PROB or [OPCODE]#N, e.g. --drop=0.01 or\n")
	fmt.Fprintf(w, "--drop=RC_RDMA_READ_RESPONSE_MIDDLE#3; see docs/rxectl.md), --pcap records them,\n")
	fmt.Fprintf(w, "--plot draws a -a run. With faults or --pcap the counters follow on stderr (or in --json).\n")
	fmt.Fprintf(w, "--ladder draws the run's connection as a ladder diagram and --trace writes each QP's\n")
	fmt.Fprintf(w, "events as JSON lines (rxectl trace reads them); with a capture, what went wrong is said\n")
	fmt.Fprintf(w, "in words after the counters (see docs/debugging.md).\n")
	fmt.Fprintln(w, "\nFlags:")
	fs := perftestFlags(t, &options{})
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// Run runs the subcommand with the command line args and returns its exit
// status. interrupt, called once the command line is checked, gives the
// context whose end stops a measurement early (what was measured is
// printed); nil means none.
func (t Test) Run(args []string, stdout, stderr io.Writer, interrupt func() context.Context) int {
	o, err := parsePerftest(t, args)
	if errors.Is(err, flag.ErrHelp) {
		t.Usage(stdout)
		return cli.ExitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "rxectl %s: %v\n", t.cmd, err)
		return cli.ExitUsage
	}
	o.stderr = stderr
	o.capWarn = &capWarner{w: stderr}
	io.WriteString(stdout, o.parseNotes())
	io.WriteString(stderr, o.cpuUtilNote())
	if n := o.rateNote(); n != "" {
		fmt.Fprintln(stderr, n)
	}
	// perftest's check_link, after its parser.
	outNote, errNote := o.outReadsNote()
	io.WriteString(stdout, outNote)
	io.WriteString(stderr, errNote)
	ctx := context.Background()
	if interrupt != nil {
		ctx = interrupt()
	}
	if o.loopback {
		err = runLoopback(ctx, t, o, stdout)
	} else if o.rdmaCM {
		err = runCM(ctx, t, o, o.host == "", stdout)
	} else if o.host == "" {
		err = runServer(ctx, t, o, stdout, nil)
	} else {
		err = runClient(ctx, t, o, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "rxectl %s: %v\n", t.cmd, err)
		return cli.ExitFail
	}
	return cli.ExitOK
}

// parsePerftest parses and checks the command line and applies perftest's
// dependencies between settings.
func parsePerftest(t Test, args []string) (*options, error) {
	o := &options{set: map[string]bool{}}
	fs := perftestFlags(t, o)
	pos, err := cli.ParseIntermixed(fs, args)
	if err != nil {
		return nil, explainFlagError(err, t)
	}
	fs.Visit(func(f *flag.Flag) {
		name := f.Name
		if l, ok := longNames[name]; ok {
			name = l
		}
		o.set[name] = true
	})
	switch {
	case len(pos) > 1:
		return nil, fmt.Errorf("at most one HOST argument, got %q", pos)
	case len(pos) == 1 && o.loopback:
		return nil, errors.New("--loopback takes no HOST")
	case len(pos) == 1:
		// An IPv6 host may come bracketed, as in a URL; every use below
		// (net.JoinHostPort, name resolution) wants it bare.
		o.host = strings.TrimSuffix(strings.TrimPrefix(pos[0], "["), "]")
	}
	return o, o.check(t)
}

// check validates the options and applies force_dependecies' rules.
func (o *options) check(t Test) error {
	// First: -g makes the test a UD one, which the other checks see.
	if err := o.checkMcast(t); err != nil {
		return err
	}
	for _, v := range validations {
		if err := v(o, t); err != nil {
			return err
		}
	}
	if err := o.checkDuration(t); err != nil {
		return err
	}
	if err := o.checkDevice(t); err != nil {
		return err
	}
	if err := o.checkObserve(); err != nil {
		return err
	}
	if err := o.checkCM(); err != nil {
		return err
	}
	if err := o.checkInject(t); err != nil {
		return err
	}
	if err := o.checkRate(); err != nil {
		return err
	}
	if err := o.checkCPUUtil(t); err != nil {
		return err
	}
	if err := o.checkOutJSON(); err != nil {
		return err
	}
	if o.reportCounters != "" {
		var err error
		if o.counterList, err = parseReportCounters(o.reportCounters); err != nil {
			return err
		}
	}
	o.forceDependencies(t)
	if o.useSRQ && o.qps > o.rxDepth {
		// Checked after forceDependencies, which bounds -r by -n, and
		// before evenRXDepth, as force_dependecies checks it before its
		// odd rx_depth work-around.
		return fmt.Errorf("--use-srq: the receive depth %d, the SRQ's size, is less than the QPs -q %d (perftest: \"Using SRQ depth should be greater than number of QPs\")", o.rxDepth, o.qps)
	}
	o.evenRXDepth(t)
	o.setOutReads()
	if err := o.checkPostList(); err != nil {
		return err
	}
	if err := o.checkPace(); err != nil {
		return err
	}
	return o.checkRecvPostList(t)
}

// validation checks one setting, or a few that depend on each other.
type validation func(o *options, t Test) error

// inRange is the validation that the setting get reads is in [lo, hi];
// format gives the error with the value.
func inRange(get func(o *options) int, lo, hi int, format string) validation {
	return func(o *options, _ Test) error {
		if v := get(o); v < lo || v > hi {
			return fmt.Errorf(format, v)
		}
		return nil
	}
}

// validations are the checks of the settings that do not depend on the
// duration mode, in the order their errors are reported.
var validations = []validation{
	func(o *options, t Test) error {
		switch {
		case o.busyPoll < 0:
			return fmt.Errorf("--busy-poll %v: not negative", o.busyPoll)
		case !o.set["busy-poll"]:
			// The default spins in the latency tests without -e only
			// (forceDependencies).
		case o.busyPoll > 0 && o.events:
			return errors.New("--busy-poll spins on the CQ, -e sleeps on CQ events: give one of them")
		case o.busyPoll > 0 && !t.lat:
			// The bandwidth loops block in CQ.Wait: spinning there starved
			// the device's goroutines (docs/performance.md, "rxectl's
			// 2-byte message rate, tried this session").
			return fmt.Errorf("--busy-poll applies to the latency tests; %s waits in CQ.Wait", t.cmd)
		}
		return nil
	},
	func(o *options, t Test) error {
		switch {
		case !o.set["loss-wait"]:
		case o.lossWait <= 0:
			return fmt.Errorf("--loss-wait %v: a positive duration", o.lossWait)
		case o.connType != "UC" && o.connType != "UD":
			return fmt.Errorf("--loss-wait is for -c UC and UD, whose lost messages nothing resends; -c %s waits for the peer up to 60 s", o.connType)
		}
		return nil
	},
	inRange(func(o *options) int { return o.size }, 1, math.MaxUint32/2, "size %d not in [1, 2147483647] (perftest: \"Message Size should be between 1 and 2147483647\")"),
	func(o *options, t Test) error {
		if t.verb == verbAtomic && (o.size != defSizeAtomic || o.all) {
			return errors.New("the message size of atomic tests is 8 bytes (perftest: \"Message size cannot be changed for Atomic tests\")")
		}
		return nil
	},
	inRange(func(o *options) int { return o.iters }, minIters, maxIters,
		"iterations %d not in ["+strconv.Itoa(minIters)+", 2^28] (each iteration keeps two 8-byte timestamps)"),
	inRange(func(o *options) int { return o.txDepth }, 1, 15000, "tx depth %d not in [1, 15000]"),
	inRange(func(o *options) int { return o.rxDepth }, 1, 16384, "rx depth %d not in [1, 16384]"),
	func(o *options, t Test) error {
		// perftest's parser refuses -r above 1 but for SEND and WRITE.
		if o.rxDepth > defRxRDMA && (t.verb == verbRead || t.verb == verbAtomic) {
			return fmt.Errorf("-r %d: %s posts no receives, its receive depth is 1 (perftest: \"On RDMA verbs rx depth can be only 1\")", o.rxDepth, t.cmd)
		}
		return nil
	},
	inRange(func(o *options) int { return o.cqMod }, 1, 1024, "cq-mod %d not in [1, 1024]"),
	inRange(func(o *options) int { return o.qps }, 1, 1024, "QPs %d not in [1, 1024]"),
	inRange(func(o *options) int { return o.cqVector }, -1, 1<<16, "-X %d: a completion vector, 0 or more"),
	inRange(func(o *options) int { return o.postList }, 1, 8192, "post list %d not in [1, 8192]"),
	inRange(func(o *options) int { return o.recvPostList }, 1, 16384, "receive post list %d not in [1, 16384]"),
	func(o *options, t Test) error {
		switch {
		case !o.useSRQ:
		case t.verb != verbSend:
			return errors.New("--use-srq is for the SEND tests (perftest: \"Using SRQ only available in SEND / SEND_IMM tests\")")
		}
		return nil
	},
	func(o *options, t Test) error {
		if o.postList > 1 && t.lat {
			return errors.New("-l: post lists are for the bandwidth tests (perftest: \"Post list is supported in BW tests only\")")
		}
		return nil
	},
	func(o *options, t Test) error {
		if t.lat && o.qps != 1 {
			return errors.New("latency tests use one QP (perftest: \"Multiple QPs only available on bw tests\")")
		}
		return nil
	},
	func(o *options, t Test) error {
		// perftest's parser refuses -o but for READ and atomic.
		if o.set["outs"] && t.verb != verbRead && t.verb != verbAtomic {
			return fmt.Errorf("-o: outstanding reads are for the read and atomic tests; %s posts none (perftest: \"Setting Outstanding reads only available on READ verb\")", t.cmd)
		}
		return nil
	},
	inRange(func(o *options) int { return o.timeout }, 0, 31, "qp-timeout %d not in [0, 31]"),
	// -p 0 would make the server listen on a port it does not tell, and
	// the client dial port 0.
	inRange(func(o *options) int { return o.oobPort }, 1, 65535, "port %d not in [1, 65535]"),
	inRange(func(o *options) int { return o.udpPort }, 0, 65535, "udp-port %d not in [0, 65535]"),
	inRange(func(o *options) int { return o.tclass }, 0, 255, "traffic class %d not in [0, 255]"),
	func(o *options, _ Test) error {
		if o.bind == "" {
			return nil
		}
		if a, err := netip.ParseAddr(o.bind); err != nil || a.IsUnspecified() {
			return fmt.Errorf("--bind %q: want the IP address of a local interface", o.bind)
		}
		return nil
	},
	(*options).checkOutput,
	func(o *options, t Test) error {
		if t.verb == verbAtomic && o.atomicType != "FETCH_AND_ADD" && o.atomicType != "CMP_AND_SWAP" {
			return fmt.Errorf("atomic type %q: FETCH_AND_ADD or CMP_AND_SWAP", o.atomicType)
		}
		return nil
	},
}

// checkOutput checks --output and --json.
func (o *options) checkOutput(t Test) error {
	switch o.output {
	case "":
	case "bandwidth", "message_rate":
		if t.lat {
			return fmt.Errorf("--output %s is for bandwidth tests; latency tests print --output latency", o.output)
		}
	case "latency":
		if !t.lat {
			return errors.New("--output latency is for latency tests; bandwidth tests print --output bandwidth or message_rate")
		}
	default:
		return fmt.Errorf("--output %q: bandwidth, message_rate or latency", o.output)
	}
	if o.json && o.output != "" {
		return errors.New("--json and --output cannot be combined")
	}
	return nil
}

// defDuration is perftest's DEF_DURATION: the period of --run_infinitely
// without -D, in seconds.
const defDuration = 5

// checkDuration checks -D, -f and --run_infinitely and sets their
// defaults: a 5 s period for --run_infinitely (DEF_DURATION), a margin of
// a quarter of the duration, and no peak in duration mode.
func (o *options) checkDuration(t Test) error {
	if o.duration < 0 || o.duration == 0 && o.set["duration"] {
		return fmt.Errorf("-D %d: a duration is a positive number of seconds", o.duration)
	}
	if o.set["margin"] && o.margin < 0 {
		return fmt.Errorf("-f %d: a margin is a number of seconds, 0 or more", o.margin)
	}
	if t.lat && o.noPeak {
		return errors.New("-N: latency tests measure no peak bandwidth (perftest: \"NoPeak only valid for BW tests\")")
	}
	if o.infinitely && o.all || o.duration > 0 && o.all {
		return errors.New("-D and --run_infinitely cannot be combined with -a")
	}
	if o.infinitely && o.duration == 0 {
		o.duration = defDuration
	}
	if o.duration == 0 {
		// force_dependecies checks its duration against the margin in
		// every run: an iteration run's is DEF_DURATION.
		if defDuration <= 2*o.margin {
			return fmt.Errorf("-f %d without -D: perftest checks it against its default duration, %d s, which is not more than twice it (perftest: \"please check that DURATION > 2*MARGIN\")", o.margin, defDuration)
		}
		return nil
	}
	if t.lat && o.infinitely {
		return errors.New("--run_infinitely is for bandwidth tests (perftest: latency tests run with -D only)")
	}
	if o.histogram || o.unsorted {
		return errors.New("-H and -U print the samples of an iteration run; a -D run keeps none (it counts round trips)")
	}
	if t.lat && t.verb == verbWrite && o.size < 2 {
		return errors.New("write-lat -D needs -s 2 or more (the first byte carries the end of the run)")
	}
	if o.margin < 0 {
		o.margin = o.duration / 4
	}
	if o.duration <= 2*o.margin { // --run_infinitely too, which uses no margin
		return fmt.Errorf("-D %d is not more than twice the margin -f %d (perftest: \"please check that DURATION > 2*MARGIN\")", o.duration, o.margin)
	}
	o.peakWarn = o.peakWarn || !t.lat && !o.noPeak
	o.noPeak = true // perftest: no peak in duration mode
	return nil
}

// ucMaxRx is perftest's UC_MAX_RX: the receive depth a UC or UD test
// with the default -r gets, at most the iterations.
const ucMaxRx = 16000

// minSRQUDRxDepth is perftest's MIN_SRQ_UD_RX_DEPTH: the receive depth of
// a UC or UD test with --use-srq and at most this many iterations.
const minSRQUDRxDepth = 100

// forceDependencies is force_dependecies: the depths follow the
// iterations, the verb and the connection type, cq-mod the size and the
// tx depth. The default --busy-poll applies to the latency tests without
// -e only. An odd receive depth is made even later, by evenRXDepth.
func (o *options) forceDependencies(t Test) {
	if !o.set["busy-poll"] && (!t.lat || o.events) {
		o.busyPoll = 0 // the bandwidth loops and -e sleep
	}
	if o.duration == 0 {
		o.txDepth = min(o.txDepth, o.iters)
		if t.verb == verbSend {
			o.rxDepth = min(o.rxDepth, o.iters)
		}
		// Nothing acknowledges a UC or UD message: a SEND that finds no
		// receive posted is lost, and the receiver waits for it. perftest
		// posts a receive for every iteration (up to UC_MAX_RX) when -r
		// is its default.
		if o.connType == "UC" || o.connType == "UD" {
			if o.useSRQ && o.iters <= minSRQUDRxDepth {
				o.rxDepth = minSRQUDRxDepth
			}
			if o.rxDepth == defRxSend {
				o.rxDepth = min(o.iters, ucMaxRx)
			}
		}
	}
	if t.verb == verbWrite {
		o.rxDepth = defRxRDMA
	}
	// MSG_SIZE_CQ_MOD_LIMIT: no moderation for large messages, except
	// (as perftest) with UD, -a or -e, or when -Q is given.
	if o.size > 8192 && !o.all && o.connType != "UD" && !o.events {
		if !o.set["cq-mod"] {
			o.cqMod = 1
		} else if o.cqMod > 1 {
			o.cqModWarn = true // checked before -Q is bounded by -t, as perftest
		}
	}
	o.cqMod = min(o.cqMod, o.txDepth)
	// perftest: no peak on send-bw's server, whose receives are not timed
	// from posts, nor above 20,000 iterations.
	sendServer := t.verb == verbSend && o.host == "" && !o.loopback && !o.bidir
	if !t.lat && (sendServer || o.duration == 0 && o.iters > 20000) {
		o.peakWarn = o.peakWarn || !o.noPeak
		o.noPeak = true
	}
	// perftest turns its dynamic CQE polling off (and says so) for an
	// iteration run of fewer than 3000 iterations, a bidirectional SEND
	// test and the latency tests (force_dependecies).
	o.dynPollOff = t.lat || o.bidir && t.verb == verbSend || o.duration == 0 && !o.infinitely && o.iters < 3000
	if o.postList > 1 && !o.set["cq-mod"] {
		// perftest: "Post List requested - CQ moderation will be the size
		// of the post list" (each list's last request is signaled).
		o.cqMod = o.postList
	}
}

// evenRXDepth is force_dependecies' last change to the receive depth,
// made after its check of the SRQ's depth against the QPs: an odd depth
// of a SEND test's regular run (-D included) becomes even.
func (o *options) evenRXDepth(t Test) {
	if t.verb == verbSend && o.rxDepth%2 == 1 && !o.all && !o.infinitely { // RUN_REGULAR, -D included
		o.rxDepth++ // perftest's "WA for a bug when rx_depth is odd in SEND"
	}
}

// parseNotes are the lines perftest's force_dependecies prints on
// standard output while it parses the command line, before anything
// else: that -Q may spoil a large message's figures, that -l set -Q,
// that the peak will not be measured, a RESULT_LINE before --cpu_util's
// warning without -D (cpuUtilNote), and that dynamic CQE polling is
// off. They
// are left out of --json and --output (perftest prints them there too).
func (o *options) parseNotes() string {
	if !o.fullOutput() {
		return ""
	}
	var b strings.Builder
	if o.cqModWarn {
		b.WriteString(report.ResultLine + "\nWarning: Large message requested and CQ moderation enabled\nWarning: It can lead to inaccurate results\n")
	}
	if o.listCQMod() {
		b.WriteString(report.ResultLine + "\nPost List requested - CQ moderation will be the size of the post list\n")
	}
	if o.peakWarn {
		b.WriteString(" WARNING: BW peak won't be measured in this run.\n")
	}
	if o.cpuUtilWarn {
		b.WriteString(report.ResultLine + "\n")
	}
	if o.dynPollOff {
		b.WriteString("Disabling dynamic polling\n")
	}
	return b.String()
}

// cqePollBatch is what perftest's header says after "CQE Poll Batch":
// nothing for a latency test, which has no such line; for a bandwidth
// test "Dynamic" while perftest's dynamic CQE polling is on, else the fixed
// batch CTX_POLL_BATCH (ctx_print_test_info).
func (o *options) cqePollBatch(t Test) string {
	switch {
	case t.lat:
		return ""
	case o.dynPollOff:
		return strconv.Itoa(ctxPollBatch)
	}
	return "Dynamic"
}

// ctxPollBatch is perftest's CTX_POLL_BATCH: how many completions its
// loops poll at a time once dynamic CQE polling is off. (Its
// CTX_POLL_BATCH_INTENSE, for more than 2048 QPs, lies beyond -q's range
// here.)
const ctxPollBatch = 16

// maxOutReads is the device's max_qp_rd_atom (rxe.DeviceAttr.MaxQPRdAtom,
// kernel rxe's RXE_MAX_QP_RD_ATOM): the most outstanding reads -o gives.
const maxOutReads = 128

// outReadsNote is what perftest's ctx_set_out_reads prints when -o is
// above the device maximum: a RESULT_LINE on standard output (left out
// of --json and --output, as the parse notes are) and two lines on
// standard error.
func (o *options) outReadsNote() (stdout, stderr string) {
	if !o.outsCapped {
		return "", ""
	}
	if o.fullOutput() {
		stdout = report.ResultLine + "\n"
	}
	return stdout, fmt.Sprintf(" Number of outstanding reads is above max = %d\n Changing to that max value\n", maxOutReads)
}

// setOutReads is perftest's ctx_set_out_reads for -o, which its parser
// takes as any number (CHECK_VALUE) and the other tests refuse: above
// the device maximum it becomes the maximum (outReadsNote says so), at
// 0 or below it is 0, the device maximum without a note.
func (o *options) setOutReads() {
	switch {
	case o.outs > maxOutReads:
		o.outs, o.outsCapped = maxOutReads, true
	case o.outs < 0:
		o.outs = 0
	}
}

// listCQMod reports whether forceDependencies set -Q to -l's size
// (perftest says so before its header).
func (o *options) listCQMod() bool { return o.postList > 1 && !o.set["cq-mod"] }

// checkPostList checks -l against the settings forceDependencies left:
// a list is posted whole, so the iterations and the tx depth must hold
// whole lists, and each list must end on a signaled request.
func (o *options) checkPostList() error {
	switch {
	case o.postList == 1:
	case o.duration == 0 && o.iters%o.postList != 0:
		return fmt.Errorf("-n %d is not a multiple of the post list -l %d (perftest: \"Number of iterations must be a multiple of post list size\")", o.iters, o.postList)
	case o.postList%o.cqMod != 0:
		return fmt.Errorf("the post list -l %d is not a multiple of the CQ moderation -Q %d (perftest: \"Post list size must be a multiple of CQ moderation\")", o.postList, o.cqMod)
	case o.postList > o.txDepth:
		return fmt.Errorf("the post list -l %d is longer than the tx depth -t %d: a list is posted whole, so none would ever fit", o.postList, o.txDepth)
	}
	return nil
}

// checkRecvPostList checks --recv_post_list against the settings
// forceDependencies left: only SEND bandwidth tests post receives in a
// loop, a run posts whole lists, and the first lists must fit the receive
// depth.
func (o *options) checkRecvPostList(t Test) error {
	l := o.recvPostList
	perQP := min(o.rxDepth, o.iters) // what prepareSend posts
	if o.useSRQ {
		perQP /= o.qps
	}
	switch {
	case l == 1:
	case t.lat:
		return errors.New("--recv_post_list is for the bandwidth tests (perftest: \"Receive post list is supported in BW tests only\")")
	case t.verb != verbSend:
		return fmt.Errorf("--recv_post_list: %s posts no receives; the SEND tests do", t.cmd)
	case o.duration == 0 && o.iters%l != 0:
		return fmt.Errorf("-n %d is not a multiple of the receive post list %d (perftest: \"Number of iterations must be a multiple of receive post list size\")", o.iters, l)
	case perQP < l:
		return fmt.Errorf("--recv_post_list %d is more than the %d receives posted for a QP (-r, at most -n, shared out among the QPs with --use-srq): no whole list would ever be posted", l, perQP)
	}
	return nil
}

// checkDevice checks the flags that pick the device, its port, its GID
// and the connection, and -e, -I and -b.
func (o *options) checkDevice(t Test) error {
	if o.devName != devName {
		return fmt.Errorf("-d %s: no such device (rxectl has one device, %s)", o.devName, devName)
	}
	if o.ibPort != 1 {
		return fmt.Errorf("-i %d: a gorxe device has port 1 only", o.ibPort)
	}
	if o.gidIndex != 0 {
		return fmt.Errorf("-x %d: a gorxe device has one GID, at index 0 (its IP address; --ipv6 for an IPv6 one)", o.gidIndex)
	}
	switch o.connType {
	case "RC":
	case "UC":
		if t.verb != verbWrite && t.verb != verbSend {
			return fmt.Errorf("-c UC: UC has no %s (perftest runs UC with the write and send tests)", t.cmd)
		}
	case "UD":
		if t.verb != verbSend {
			return fmt.Errorf("-c UD: UD has no %s (perftest runs UD with send-bw and send-lat)", t.cmd)
		}
	case "XRC", "DC", "SRD":
		return fmt.Errorf("-c %s: rxectl supports RC, UC and UD so far", o.connType)
	default:
		return fmt.Errorf("-c %q: RC, UC, UD, XRC, DC or SRD", o.connType)
	}
	if o.set["inline_size"] && (t.verb == verbRead || t.verb == verbAtomic) {
		// perftest's parser refuses -I, 0 included, for READ and atomic.
		return fmt.Errorf("-I: inline data is for the SEND and WRITE tests; %s posts none (perftest: \"Inline feature not available on READ/Atomic verbs\")", t.cmd)
	}
	if o.inline < 0 || o.inline > maxInline {
		return fmt.Errorf("-I %d: the device's max inline data is %d bytes", o.inline, maxInline)
	}
	if o.bind != "" && o.ipv6 != !netip.MustParseAddr(o.bind).Unmap().Is4() {
		if o.ipv6 {
			return fmt.Errorf("--ipv6 with --bind %s: give an IPv6 address", o.bind)
		}
		return fmt.Errorf("--bind %s is an IPv6 address: add --ipv6", o.bind)
	}
	if o.bind != "" && o.loopback {
		return fmt.Errorf("--bind %s: --loopback binds its own addresses (127.0.0.1 and 127.0.0.2, or ::1 with --ipv6): drop --bind", o.bind)
	}
	if o.bidir && o.infinitely {
		return errors.New("-b with --run_infinitely is not implemented: give -D for a timed bidirectional run")
	}
	return nil
}

// maxSize is the largest message size of the run.
func (o *options) maxSize() int {
	if o.all {
		if o.udMTU > 0 {
			return o.udMTU
		}
		return maxAllSize
	}
	return o.size
}

// sizes lists the message sizes of the run.
func (o *options) sizes() []int {
	if !o.all {
		return []int{o.size}
	}
	var s []int
	for n := 2; n <= o.maxSize(); n *= 2 {
		s = append(s, n)
	}
	return s
}

func mtuEnum(b int) int {
	for m := 1; m <= 5; m++ {
		if 128<<m == b {
			return m
		}
	}
	return 0
}

// fullOutput is perftest's FULL_VERBOSITY: the header, address lines and
// tables (not --output, not --json).
func (o *options) fullOutput() bool { return o.output == "" && !o.json }

// runServer waits for one client on the TCP port and runs the test. With
// ln set it uses that listener.
func runServer(ctx context.Context, t Test, o *options, stdout io.Writer, ln net.Listener) error {
	if ln == nil {
		var err error
		ln, err = net.Listen("tcp", ":"+strconv.Itoa(o.oobPort))
		if err != nil {
			return fmt.Errorf("listen on TCP port %d: %w (another server running? try -p)", o.oobPort, err)
		}
	}
	defer ln.Close()
	if o.fullOutput() {
		io.WriteString(stdout, "\n************************************\n* Waiting for client to connect... *\n************************************\n")
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	conn, err := ln.Accept()
	stop()
	if err != nil {
		if ctx.Err() != nil {
			return errors.New("interrupted while waiting for a client")
		}
		return fmt.Errorf("accept: %w", err)
	}
	ln.Close()
	return runSession(ctx, t, o, conn, false, stdout)
}

// dialTimeout bounds the client's TCP connect.
const dialTimeout = 10 * time.Second

// runClient connects to the server and runs the test.
func runClient(ctx context.Context, t Test, o *options, stdout io.Writer) error {
	addr := net.JoinHostPort(o.host, strconv.Itoa(o.oobPort))
	d := net.Dialer{Timeout: dialTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("connect to %s: connection refused — is a server running?", addr)
		}
		return fmt.Errorf("connect to %s: %w", addr, err)
	}
	return runSession(ctx, t, o, conn, true, stdout)
}

// runLoopback runs a server and a client in this process: the exchange
// over TCP on 127.0.0.1, RoCE between 127.0.0.1 (server) and 127.0.0.2
// (client). The client's output is printed. Faults and the capture apply
// to the client's device only: it sends and receives every RoCE datagram
// of the test, so one capture file holds both directions once, and a rule
// for both directions hits requests and responses alike. The statistics
// show both devices.
func runLoopback(ctx context.Context, t Test, o *options, stdout io.Writer) error {
	if o.rdmaCM {
		return runLoopbackCM(ctx, t, o, stdout)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var ss, cs *session
	so, co := splitLoopback(o, &ss, &cs)
	if o.ipv6 {
		// IPv6 has one loopback address: both devices bind ::1, the
		// client on another UDP port, which the exchange tells the server
		// (rxectl to rxectl).
		so.bind, co.bind = "::1", "::1"
		if co.udpPort == so.udpPort && co.udpPort != 0 {
			co.udpPort = 0
		}
	}
	// The server follows the client: an interrupt ends the client's
	// measurement, which then finishes the exchange with the server.
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srvErr := make(chan error, 1)
	go func() { srvErr <- runServer(sctx, t, &so, io.Discard, ln) }()
	co.host, co.oobPort = "127.0.0.1", ln.Addr().(*net.TCPAddr).Port
	cerr := runClient(ctx, t, &co, stdout)
	if cerr != nil {
		cancel()
	}
	return endLoopback(stdout, cs, ss, cerr, <-srvErr)
}

// splitLoopback returns the options of a --loopback run's two ends,
// copies of o: the server on 127.0.0.1, with no output, fault rules,
// capture or plot of its own (it shares the trace file and draws no
// ladder), and the client on 127.0.0.2; both write to the run's stderr
// (shareStderr) and leave their sessions in *ss and *cs.
func splitLoopback(o *options, ss, cs **session) (so, co options) {
	so, co = *o, *o
	so.bind, co.bind = "127.0.0.1", "127.0.0.2"
	so.output, so.json, so.outJSON = "", false, false
	so.rules, so.pcap, so.plot = nil, "", ""
	shareStderr(o, &co, &so)
	if o.obs != nil {
		so.obs = &observe{trace: o.obs.trace}
	}
	so.hooks.held, co.hooks.held = ss, cs
	return so, co
}

// endLoopback reports a loopback run once both ends have returned (cerr
// the client's error, serr the server's): the client's session prints the
// final report with the server's counters, and the client's error, else the
// server's, is the run's. A client that failed only because the server
// closed the exchange reports the server's error, the cause.
func endLoopback(stdout io.Writer, cs, ss *session, cerr, serr error) error {
	if cs != nil {
		cerr = cs.report(stdout, ss, cerr)
	}
	switch {
	case serr != nil && (errors.Is(cerr, oob.ErrPeerClosed) || errors.Is(cerr, errPeerDone)):
		return fmt.Errorf("server: %w", serr)
	case cerr != nil:
		return cerr
	case serr != nil:
		return fmt.Errorf("server: %w", serr)
	}
	return nil
}

// rxeReceiveSpin is --receive-spin as rxe.Options.ReceiveSpin, whose
// zero value is the default: 0 on the command line turns the spin off.
func (o *options) rxeReceiveSpin() time.Duration {
	if o.receiveSpin <= 0 {
		return -1
	}
	return o.receiveSpin
}
