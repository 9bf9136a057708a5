package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/netip"
	"strings"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/rxe"
)

// resultLine is perftest's RESULT_LINE: 87 dashes.
var resultLine = strings.Repeat("-", 87)

// bwTest describes one bandwidth subcommand.
type bwTest struct {
	cmd      string       // subcommand name
	title    string       // perftest's test name in the header
	op       rxe.WROpcode // the measured operation
	defIters int          // perftest's default iterations
}

var bwTests = []bwTest{
	{"read-bw", "RDMA_Read", rxe.WRRDMARead, 1000},
	{"write-bw", "RDMA_Write", rxe.WRRDMAWrite, 5000},
	{"send-bw", "Send", rxe.WRSend, 1000},
}

func init() {
	for _, t := range bwTests {
		t := t
		commands = append(commands, command{
			name: t.cmd, args: "[flags] [HOST]",
			summary: "perftest-style " + t.title + " bandwidth test (ib_" + strings.ReplaceAll(t.cmd, "-", "_") + ")",
			run:     func(args []string, stdout, stderr io.Writer) int { return runBW(t, args, stdout, stderr) },
			help:    func(w io.Writer) { bwUsage(t, w) },
		})
	}
}

// bwOptions are a bandwidth test's settings; flag names and meanings are
// perftest's (protocol reference §5.1).
type bwOptions struct {
	size     int
	all      bool
	iters    int
	mtu      int
	txDepth  int
	cqMod    int
	qps      int
	outs     int
	noPeak   bool
	gbits    bool
	timeout  int
	loopback bool
	json     bool
	udpPort  int
	rxDepth  int
	output   string
}

func bwFlags(t bwTest, o *bwOptions) *flag.FlagSet {
	fs := flag.NewFlagSet(t.cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	both := func(p *int, short, long string, def int, usage string) {
		fs.IntVar(p, short, def, usage)
		fs.IntVar(p, long, def, usage)
	}
	both(&o.size, "s", "size", 65536, "message size in bytes")
	both(&o.iters, "n", "iters", t.defIters, "iterations (at least 5)")
	both(&o.mtu, "m", "mtu", 0, "path MTU: 256, 512, 1024, 2048 or 4096 (default: the port's active MTU)")
	both(&o.txDepth, "t", "tx-depth", 128, "send queue depth")
	both(&o.cqMod, "Q", "cq-mod", 0, "signal every Nth work request (default 100; 1 above 8 KiB)")
	both(&o.qps, "q", "qp", 1, "number of QPs")
	both(&o.outs, "o", "outs", 16, "outstanding READs (max_rd_atomic)")
	both(&o.timeout, "u", "qp-timeout", 14, "local ACK timeout exponent: 4.096 us * 2^N")
	both(&o.rxDepth, "r", "rx-depth", 512, "receive queue depth (send-bw)")
	fs.BoolVar(&o.all, "a", false, "run sizes 2 to 8 MiB")
	fs.BoolVar(&o.all, "all", false, "run sizes 2 to 8 MiB")
	fs.BoolVar(&o.noPeak, "N", false, "do not compute peak bandwidth")
	fs.BoolVar(&o.noPeak, "noPeak", false, "do not compute peak bandwidth")
	fs.BoolVar(&o.gbits, "report_gbits", false, "report Gb/s instead of MiB/s")
	fs.BoolVar(&o.loopback, "loopback", false, "run server and client in this process over loopback UDP (127.0.0.1 and 127.0.0.2)")
	fs.BoolVar(&o.json, "json", false, "print results as JSON")
	fs.IntVar(&o.udpPort, "udp-port", 4791, "RoCE UDP port (0: ephemeral, loopback only)")
	fs.StringVar(&o.output, "output", "", "print only one figure: bandwidth or message_rate")
	return fs
}

func bwUsage(t bwTest, w io.Writer) {
	fmt.Fprintf(w, "usage: rxectl %s [flags] [HOST]\n\n", t.cmd)
	fmt.Fprintf(w, "Measures %s bandwidth like perftest's ib_%s, with the same flags and table.\n",
		t.title, strings.ReplaceAll(t.cmd, "-", "_"))
	fmt.Fprintln(w, "With --loopback, server and client run in this process on 127.0.0.1 and 127.0.0.2.")
	fmt.Fprintln(w, "\nFlags:")
	fs := bwFlags(t, &bwOptions{})
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// runBW implements the bandwidth subcommands.
func runBW(t bwTest, args []string, stdout, stderr io.Writer) int {
	var o bwOptions
	fs := bwFlags(t, &o)
	pos, err := parseIntermixed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			bwUsage(t, stdout)
			return exitOK
		}
		fmt.Fprintf(stderr, "rxectl %s: %v\n", t.cmd, err)
		return exitUsage
	}
	if err := o.check(t, pos); err != nil {
		fmt.Fprintf(stderr, "rxectl %s: %v\n", t.cmd, err)
		return exitUsage
	}
	if !o.loopback {
		fmt.Fprintf(stderr, "rxectl %s: only --loopback is available so far: the two-host mode with perftest's out-of-band exchange is not implemented yet\n", t.cmd)
		return exitUsage
	}
	sizes := []int{o.size}
	if o.all {
		sizes = sizes[:0]
		for s := 2; s <= 8<<20; s *= 2 {
			sizes = append(sizes, s)
		}
	}
	lb, err := newLoopback(t, &o, sizes[len(sizes)-1])
	if err != nil {
		fmt.Fprintf(stderr, "rxectl %s: %v\n", t.cmd, err)
		return exitFail
	}
	defer lb.close()
	if !o.json && o.output == "" {
		lb.printHeader(stdout)
	}
	var results []bwResult
	for _, size := range sizes {
		r, err := lb.run(size)
		if err != nil {
			fmt.Fprintf(stderr, "rxectl %s: %d bytes: %v\n", t.cmd, size, err)
			return exitFail
		}
		results = append(results, r)
		switch {
		case o.json:
		case o.output == "bandwidth":
			fmt.Fprintf(stdout, "%.2f\n", r.avg(o.gbits))
		case o.output == "message_rate":
			fmt.Fprintf(stdout, "%.6f\n", r.MsgRate)
		default:
			io.WriteString(stdout, r.row(o.gbits))
		}
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(map[string]any{"test": t.title + " BW", "loopback": true, "mtu": lb.mtu.Bytes(), "qps": o.qps, "results": results})
	} else if o.output == "" {
		fmt.Fprintln(stdout, resultLine)
	}
	return exitOK
}

func (o *bwOptions) check(t bwTest, pos []string) error {
	if len(pos) > 1 {
		return fmt.Errorf("at most one HOST argument, got %q", pos)
	}
	if len(pos) == 1 && o.loopback {
		return fmt.Errorf("--loopback takes no HOST")
	}
	if o.size < 1 || o.size > 1<<31 {
		return fmt.Errorf("size %d not in [1, 2^31]", o.size)
	}
	if o.iters < 5 {
		return fmt.Errorf("iterations %d: at least 5", o.iters)
	}
	if o.mtu != 0 && rxe.MTU(mtuEnum(o.mtu)).Bytes() != o.mtu {
		return fmt.Errorf("MTU %d: one of 256, 512, 1024, 2048, 4096", o.mtu)
	}
	if o.txDepth < 1 || o.txDepth > 8192 {
		return fmt.Errorf("tx depth %d not in [1, 8192]", o.txDepth)
	}
	if o.qps < 1 || o.qps > 1024 {
		return fmt.Errorf("QPs %d not in [1, 1024]", o.qps)
	}
	if o.outs < 1 || o.outs > 128 {
		return fmt.Errorf("outstanding reads %d not in [1, 128]", o.outs)
	}
	if o.timeout < 0 || o.timeout > 31 {
		return fmt.Errorf("qp-timeout %d not in [0, 31]", o.timeout)
	}
	if o.udpPort < 0 || o.udpPort > 65535 {
		return fmt.Errorf("udp-port %d", o.udpPort)
	}
	if o.output != "" && o.output != "bandwidth" && o.output != "message_rate" {
		return fmt.Errorf("--output %q: bandwidth or message_rate", o.output)
	}
	if o.cqMod < 0 {
		return fmt.Errorf("cq-mod %d", o.cqMod)
	}
	if o.iters > 20000 {
		o.noPeak = true // as perftest
	}
	o.txDepth = min(o.txDepth, o.iters)
	return nil
}

func mtuEnum(b int) int {
	for m := 1; m <= 5; m++ {
		if 128<<m == b {
			return m
		}
	}
	return 0
}

// bwResult is one row of the table.
type bwResult struct {
	Size    int     `json:"bytes"`
	Iters   int     `json:"iterations"`
	Peak    float64 `json:"bw_peak_bytes_per_sec"`
	Average float64 `json:"bw_average_bytes_per_sec"`
	MsgRate float64 `json:"msg_rate_mpps"`
}

func (r bwResult) avg(gbits bool) float64 { return scaleBW(r.Average, gbits) }

// scaleBW converts bytes/s to perftest's units: MiB/s (2^20, even in the
// old "[MB/sec]" header) or, with --report_gbits, 10^9 bit/s.
func scaleBW(v float64, gbits bool) float64 {
	if gbits {
		return v / 125e6
	}
	return v / (1 << 20)
}

// row formats a result with perftest's format
// " %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t     %-7.6lf\n".
func (r bwResult) row(gbits bool) string {
	return " " + cUint(uint64(r.Size), 7) + "    " + cUint(uint64(r.Iters), 10) + "       " +
		cFloat(scaleBW(r.Peak, gbits), 7, 2) + "            " + cFloat(scaleBW(r.Average, gbits), 7, 2) +
		"\t\t     " + cFloat(r.MsgRate, 7, 6) + "\n"
}

// loopback is a server and a client device in one process.
type loopback struct {
	t       bwTest
	o       *bwOptions
	mtu     rxe.MTU
	srv     *bwSide
	cli     *bwSide
	infoSrv []rxe.ConnInfo
	infoCli []rxe.ConnInfo
	posted  map[uint32]int // receives kept posted per server QP (send-bw)
}

type bwSide struct {
	dev *rxe.Device
	pd  *rxe.PD
	cq  *rxe.CQ
	qps []*rxe.QP
	mr  *rxe.MR
}

func newSide(addr netip.AddrPort, o *bwOptions, bufSize int, cqe int) (*bwSide, error) {
	conn, err := netdev.ListenUDP(addr, netdev.Options{BlockingWrite: true})
	if err != nil {
		return nil, fmt.Errorf("listen on %v: %w (is UDP port %d taken, e.g. by the rdma_rxe kernel module? try --udp-port)", addr, err, addr.Port())
	}
	dev, err := rxe.Open(conn, rxe.Options{OwnConn: true})
	if err != nil {
		conn.Close()
		return nil, err
	}
	s := &bwSide{dev: dev}
	if s.pd, err = dev.AllocPD(); err != nil {
		return nil, err
	}
	if s.cq, err = dev.CreateCQ(cqe, -1); err != nil {
		return nil, err
	}
	buf := make([]byte, max(bufSize, 4096))
	if s.mr, err = s.pd.RegMR(buf, rxe.AccessLocalWrite|rxe.AccessRemoteWrite|rxe.AccessRemoteRead|rxe.AccessRemoteAtomic); err != nil {
		return nil, err
	}
	for range o.qps {
		qp, err := s.pd.CreateQP(rxe.QPInitAttr{Type: rxe.QPTypeRC, SendCQ: s.cq, RecvCQ: s.cq,
			Cap: rxe.QPCap{MaxSendWR: o.txDepth, MaxRecvWR: o.rxDepth, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			return nil, err
		}
		s.qps = append(s.qps, qp)
	}
	return s, nil
}

func newLoopback(t bwTest, o *bwOptions, maxSize int) (*loopback, error) {
	lb := &loopback{t: t, o: o, posted: map[uint32]int{}}
	port := uint16(o.udpPort)
	cqe := o.qps*(o.txDepth+o.rxDepth) + 16
	var err error
	if lb.srv, err = newSide(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port), o, maxSize, cqe); err != nil {
		return nil, err
	}
	if lb.cli, err = newSide(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), port), o, maxSize, cqe); err != nil {
		lb.srv.dev.Close()
		return nil, err
	}
	lb.mtu = min(lb.srv.dev.ActiveMTU(), lb.cli.dev.ActiveMTU())
	if o.mtu != 0 {
		if rxe.MTU(mtuEnum(o.mtu)) > lb.mtu {
			lb.close()
			return nil, fmt.Errorf("MTU %d is above the port's active MTU %v", o.mtu, lb.mtu)
		}
		lb.mtu = rxe.MTU(mtuEnum(o.mtu))
	}
	for i := range o.qps {
		is, ic := lb.srv.qps[i].Info(rand.Uint32()), lb.cli.qps[i].Info(rand.Uint32())
		is.MaxRdAtomic = o.outs
		co := rxe.ConnectOptions{MTU: lb.mtu, Timeout: uint8(o.timeout), MaxRdAtomic: o.outs}
		if err := lb.srv.qps[i].Connect(is, ic, co); err != nil {
			lb.close()
			return nil, err
		}
		if err := lb.cli.qps[i].Connect(ic, is, co); err != nil {
			lb.close()
			return nil, err
		}
		lb.infoSrv, lb.infoCli = append(lb.infoSrv, is), append(lb.infoCli, ic)
	}
	return lb, nil
}

func (lb *loopback) close() {
	lb.cli.dev.Close()
	lb.srv.dev.Close()
}

// printHeader prints perftest's header block and address lines.
func (lb *loopback) printHeader(w io.Writer) {
	o := lb.o
	var b strings.Builder
	b.WriteString(resultLine + "\n")
	fmt.Fprintf(&b, "                    %s BW Test\n", lb.t.title)
	fmt.Fprintf(&b, " Dual-port       : OFF\t\tDevice         : %s\n", lb.cli.dev.Name())
	fmt.Fprintf(&b, " Number of qps   : %d\t\tTransport type : IB\n", o.qps)
	b.WriteString(" Connection type : RC\t\tUsing SRQ      : OFF\n")
	fmt.Fprintf(&b, " TX depth        : %d\n", o.txDepth)
	fmt.Fprintf(&b, " CQ Moderation   : %d\n", lb.cqMod(o.size))
	fmt.Fprintf(&b, " Mtu             : %d[B]\n", lb.mtu.Bytes())
	b.WriteString(" Link type       : Ethernet\n")
	b.WriteString(" GID index       : 0\n")
	if lb.t.op == rxe.WRRDMARead {
		fmt.Fprintf(&b, " Outstand reads  : %d\n", o.outs)
	} else {
		b.WriteString(" Max inline data : 0[B]\n")
	}
	b.WriteString(" rdma_cm QPs\t : OFF\n")
	b.WriteString(" Data ex. method : loopback (in process)\n")
	b.WriteString(resultLine + "\n")
	for i := range lb.cli.qps {
		b.WriteString(lb.addrLine("local", lb.infoCli[i], lb.cli))
		b.WriteString(lb.addrLine("remote", lb.infoSrv[i], lb.srv))
	}
	b.WriteString(resultLine + "\n")
	if o.gbits {
		b.WriteString(" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n")
	} else {
		b.WriteString(" #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]\n")
	}
	io.WriteString(w, b.String())
}

// addrLine formats perftest's address and GID lines with C printf
// semantics: "LID %#04x QPN %#06x PSN %#06x[ OUT %#04x][ RKey %#08x VAddr %#016llx]".
func (lb *loopback) addrLine(which string, ci rxe.ConnInfo, s *bwSide) string {
	line := fmt.Sprintf(" %s address: LID %s QPN %s PSN %s", which, cHexAlt(0, 4), cHexAlt(uint64(ci.QPN), 6), cHexAlt(uint64(ci.PSN), 6))
	if lb.t.op == rxe.WRRDMARead {
		line += " OUT " + cHexAlt(uint64(lb.o.outs), 4)
	}
	if lb.t.op == rxe.WRRDMARead || lb.t.op == rxe.WRRDMAWrite {
		line += " RKey " + cHexAlt(uint64(s.mr.RKey()), 8) + " VAddr " + cHexAlt(s.mr.Addr(), 16)
	}
	return line + "\n GID: " + gidString(ci.GID.As16()) + "\n"
}

// cqMod returns the completion moderation for a size: -Q if given, else
// perftest's 100, forced to 1 above 8 KiB.
func (lb *loopback) cqMod(size int) int {
	switch {
	case lb.o.cqMod > 0:
		return lb.o.cqMod
	case size > 8192:
		return 1
	}
	return 100
}

// run measures one size, as perftest's run_iter_bw: keep tx-depth work
// requests outstanding per QP, signal every cq-mod'th, and time each post
// and each completion.
func (lb *loopback) run(size int) (bwResult, error) {
	o := lb.o
	cqMod := min(lb.cqMod(size), o.txDepth)
	nq := len(lb.cli.qps)
	total := o.iters * nq
	tposted := make([]time.Time, total)
	tcompleted := make([]time.Time, total)
	if lb.t.op == rxe.WRSend {
		stop := lb.startReceiver()
		defer stop()
	}
	scnt := make([]int, nq)
	ccnt := make([]int, nq)
	done := 0
	wcs := make([]rxe.WC, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	remote := lb.srv.mr
	for done < nq {
		for q, qp := range lb.cli.qps {
			for scnt[q] < o.iters && scnt[q]-ccnt[q] < o.txDepth {
				i := scnt[q]
				flags := rxe.SendFlags(0)
				if (i+1)%cqMod == 0 || i == o.iters-1 {
					flags = rxe.SendSignaled
				}
				wr := rxe.SendWR{ID: uint64(q)<<32 | uint64(i), Opcode: lb.t.op, Flags: flags,
					SGList: []rxe.SGE{lb.cli.mr.SGE(0, size)}, RemoteAddr: remote.Addr(), RKey: remote.RKey()}
				tposted[q*o.iters+i] = time.Now()
				if _, err := qp.PostSend(wr); err != nil {
					return bwResult{}, err
				}
				scnt[q]++
			}
		}
		n, err := lb.cli.cq.Wait(ctx, wcs)
		if err != nil {
			return bwResult{}, fmt.Errorf("waiting for completions: %w", err)
		}
		now := time.Now()
		for _, wc := range wcs[:n] {
			if wc.Status != rxe.WCSuccess {
				return bwResult{}, fmt.Errorf("completion with status %v (vendor_err %#x) on QP %#x", wc.Status, wc.VendorErr, wc.QPNum)
			}
			q, i := int(wc.ID>>32), int(uint32(wc.ID))
			tcompleted[q*o.iters+i] = now
			ccnt[q] = i + 1
			if ccnt[q] == o.iters {
				done++
			}
		}
	}
	first, last := tposted[0], tcompleted[0]
	for q := range nq {
		if tposted[q*o.iters].Before(first) {
			first = tposted[q*o.iters]
		}
		if l := tcompleted[q*o.iters+o.iters-1]; l.After(last) {
			last = l
		}
	}
	elapsed := last.Sub(first).Seconds()
	r := bwResult{Size: size, Iters: total}
	if elapsed > 0 {
		r.Average = float64(size) * float64(total) / elapsed
		r.MsgRate = float64(total) / elapsed / 1e6
	}
	if !o.noPeak {
		r.Peak = peakBW(size, tposted[:o.iters], tcompleted[:o.iters], cqMod)
	}
	return r, nil
}

// peakBW is perftest's BW peak: the size divided by the smallest average
// time per message over every window from a post i to a signaled
// completion j >= i.
func peakBW(size int, posted, completed []time.Time, cqMod int) float64 {
	best := math.Inf(1)
	n := len(posted)
	for i := 0; i < n; i++ {
		for j := (i/cqMod+1)*cqMod - 1; j < n; j += cqMod {
			if completed[j].IsZero() {
				continue
			}
			d := completed[j].Sub(posted[i]).Seconds() / float64(j-i+1)
			if d > 0 && d < best {
				best = d
			}
		}
	}
	if math.IsInf(best, 1) {
		return 0
	}
	return float64(size) / best
}

// startReceiver keeps the server's receive queues full for send-bw and
// returns a function that stops it. Receive buffers span the whole region,
// so receives left posted after one size serve the next.
func (lb *loopback) startReceiver() func() {
	srv := lb.srv
	for _, qp := range srv.qps {
		for range lb.o.rxDepth - lb.posted[qp.QPN()] {
			qp.PostRecv(rxe.RecvWR{SGList: []rxe.SGE{srv.mr.SGE(0, srv.mr.Len())}})
		}
		lb.posted[qp.QPN()] = lb.o.rxDepth
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		wcs := make([]rxe.WC, 64)
		byQPN := map[uint32]*rxe.QP{}
		for _, qp := range srv.qps {
			byQPN[qp.QPN()] = qp
		}
		for {
			n, err := srv.cq.Wait(ctx, wcs)
			if err != nil {
				return
			}
			for _, wc := range wcs[:n] {
				if qp := byQPN[wc.QPNum]; qp != nil && wc.Status == rxe.WCSuccess {
					qp.PostRecv(rxe.RecvWR{SGList: []rxe.SGE{srv.mr.SGE(0, srv.mr.Len())}})
				}
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
