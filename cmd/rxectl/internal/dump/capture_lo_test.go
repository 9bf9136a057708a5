//go:build linux

package dump

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/rxe"
	"github.com/stretchr/testify/require"
)

// loEnd is one side of the RC connection of the capture tests.
type loEnd struct {
	dev *rxe.Device
	cq  *rxe.CQ
	qp  *rxe.QP
	mr  *rxe.MR
	buf []byte
}

// newLoEnd opens a device on a UDP socket bound to addr (port 0: an
// ephemeral port, so the test never needs 4791) with one RC QP and one MR.
func newLoEnd(t *testing.T, addr, name string) *loEnd {
	t.Helper()
	conn, err := netdev.ListenUDP(netip.MustParseAddrPort(addr), netdev.Options{BlockingWrite: true})
	require.NoError(t, err)
	dev, err := rxe.Open(conn, rxe.Options{Name: name, LinkMTU: 9000, OwnConn: true})
	if err != nil {
		conn.Close()
		require.NoError(t, err)
	}
	return newRCEnd(t, dev)
}

// newRCEnd gives dev (closed at the end of the test) one CQ, one RC QP and
// one 64 KiB MR open to every remote access.
func newRCEnd(t *testing.T, dev *rxe.Device) *loEnd {
	t.Helper()
	t.Cleanup(func() { dev.Close() })
	pd, err := dev.AllocPD()
	require.NoError(t, err)
	cq, err := dev.CreateCQ(256, -1)
	require.NoError(t, err)
	qp, err := pd.CreateQP(rxe.QPInitAttr{Type: rxe.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: rxe.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	require.NoError(t, err)
	buf := make([]byte, 64<<10)
	mr, err := pd.RegMR(buf, rxe.AccessLocalWrite|rxe.AccessRemoteWrite|rxe.AccessRemoteRead|rxe.AccessRemoteAtomic)
	require.NoError(t, err)
	return &loEnd{dev: dev, cq: cq, qp: qp, mr: mr, buf: buf}
}

// loSync orders the test goroutine with both devices' goroutines, which
// touch registered memory only under their QP's mutex (Query takes it).
func loSync(a, b *loEnd) {
	a.qp.Query()
	b.qp.Query()
}

// loWait waits for one successful completion on e's CQ.
func loWait(t *testing.T, e *loEnd, what string) rxe.WC {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wc := make([]rxe.WC, 1)
	_, err := e.cq.Wait(ctx, wc)
	require.NoError(t, err, "waiting for the completion of %s", what)
	require.Equal(t, rxe.WCSuccess, wc[0].Status, "%s: %v", what, wc[0].Status)
	return wc[0]
}

// tcpdumpRun is a running tcpdump.
type tcpdumpRun struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer // everything tcpdump wrote to stderr, once it exited
	done   chan error   // receives Wait's result
}

// startTcpdump starts tcpdump on lo writing the UDP packets of ports to
// file and returns once tcpdump says it is listening. tcpdump is killed at
// the end of the test if it is still running.
func startTcpdump(t *testing.T, path, file string, ports ...uint16) *tcpdumpRun {
	t.Helper()
	var filter []string
	for _, p := range ports {
		filter = append(filter, "port "+strconv.Itoa(int(p)))
	}
	// --immediate-mode: hand each packet to tcpdump at once (else
	// TPACKET_V3 holds them for up to a second, and a SIGINT before then
	// loses them); -U: write each packet to the file at once; -s 0: whole
	// packets; -Z root: stay root instead of switching to a "tcpdump"
	// user, which need not exist.
	args := []string{"-i", "lo", "--immediate-mode", "-U", "-s", "0", "-Z", "root", "-w", file,
		"udp and (" + strings.Join(filter, " or ") + ")"}
	t.Logf("%s %s", path, strings.Join(args, " "))
	cmd := exec.Command(path, args...)
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	cmd.Stderr = pw
	require.NoError(t, cmd.Start())
	pw.Close()
	run := &tcpdumpRun{cmd: cmd, done: make(chan error, 1)}
	listening := make(chan struct{})
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			run.stderr.Write(sc.Bytes())
			run.stderr.WriteByte('\n')
			if strings.Contains(sc.Text(), "listening on lo") {
				close(listening)
			}
		}
		io.Copy(io.Discard, pr)
		pr.Close()
	}()
	go func() {
		err := cmd.Wait()
		<-copied // stderr is complete before done is sent
		run.done <- err
	}()
	t.Cleanup(func() {
		cmd.Process.Kill() // no-op (an error) once it has exited
	})
	select {
	case <-listening:
		return run
	case err := <-run.done:
		t.Fatalf("tcpdump exited before listening: %v\n%s", err, run.stderr.String())
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		err := <-run.done
		t.Fatalf("tcpdump did not say it was listening within 10s (%v)\n%s", err, run.stderr.String())
	}
	return nil
}

// stop interrupts tcpdump, as ^C does, and waits for it to write the end of
// the file and its statistics; it returns what tcpdump wrote to stderr.
func (r *tcpdumpRun) stop(t *testing.T) string {
	t.Helper()
	require.NoError(t, r.cmd.Process.Signal(os.Interrupt))
	select {
	case err := <-r.done:
		require.NoError(t, err, "tcpdump: %s", r.stderr.String())
	case <-time.After(10 * time.Second):
		r.cmd.Process.Kill()
		<-r.done
		t.Fatalf("tcpdump did not stop within 10s of SIGINT\n%s", r.stderr.String())
	}
	return r.stderr.String()
}

// loCapture is what a capture file of TestLoopbackCaptureICRC holds.
type loCapture struct {
	frames int            // all frames
	probes int            // frames sent by the probe socket
	roce   []*layers.IPv4 // the IPv4 header (nil if none) of every other frame
}

// readLoCapture reads the pcap file, which tcpdump may still be writing,
// telling the probe socket's frames (UDP source port probePort) from the
// others. It returns what it read before any error.
func readLoCapture(file string, probePort uint16) (loCapture, error) {
	var c loCapture
	fh, err := os.Open(file)
	if err != nil {
		return c, err
	}
	defer fh.Close()
	r, err := pcapgo.NewReader(fh)
	if err != nil {
		return c, err
	}
	for {
		data, _, err := r.ReadPacketData()
		if err == io.EOF {
			return c, nil
		}
		if err != nil {
			return c, err
		}
		c.frames++
		pkt := gopacket.NewPacket(data, r.LinkType(), gopacket.DecodeOptions{Lazy: true, NoCopy: true})
		if udp, ok := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP); ok && uint16(udp.SrcPort) == probePort {
			c.probes++
			continue
		}
		ip, _ := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		c.roce = append(c.roce, ip)
	}
}

// waitCapturing sends datagrams from probe to itself until one of them is
// in the file. tcpdump says "listening" once its filter is set, but its
// ring buffer may still be full of what crossed lo before (a busy lo fills
// it in a millisecond), and until tcpdump has read that, the kernel drops
// new packets: a probe in the file shows the ring has been drained.
func waitCapturing(t *testing.T, td *tcpdumpRun, file string, probe *net.UDPConn) {
	t.Helper()
	port := uint16(probe.LocalAddr().(*net.UDPAddr).Port)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		_, err := probe.WriteToUDP([]byte("gorxe capture probe"), probe.LocalAddr().(*net.UDPAddr))
		require.NoError(t, err)
		for range 5 {
			time.Sleep(5 * time.Millisecond)
			if c, _ := readLoCapture(file, port); c.probes > 0 {
				return
			}
		}
	}
	t.Fatalf("no probe datagram in the capture after 10s\n%s", td.stop(t))
}

// TestLoopbackCaptureICRC captures a run of every kind of RC operation
// between two devices on lo with tcpdump and checks that rxectl dump
// decodes every packet with a valid ICRC, that every packet went out with
// IPv4 ID 0 and DF (docs/icrc.md), and, when tshark is installed, that
// Wireshark finds nothing malformed in it.
func TestLoopbackCaptureICRC(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to capture on lo; CI runs as root")
	}
	tcpdump, err := exec.LookPath("tcpdump")
	if err != nil {
		t.Skip("tcpdump not installed; CI installs it")
	}

	a := newLoEnd(t, "127.0.0.1:0", "rxe-a")
	b := newLoEnd(t, "127.0.0.2:0", "rxe-b")
	pa, pb := a.dev.Addr().Port(), b.dev.Addr().Port()
	const mtu = rxe.MTU1024
	m := mtu.Bytes()
	ia, ib := a.qp.Info(rand.Uint32()), b.qp.Info(rand.Uint32())
	require.NoError(t, a.qp.Connect(ia, ib, rxe.ConnectOptions{MTU: mtu}))
	require.NoError(t, b.qp.Connect(ib, ia, rxe.ConnectOptions{MTU: mtu}))

	probe, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	t.Cleanup(func() { probe.Close() })
	pp := uint16(probe.LocalAddr().(*net.UDPAddr).Port)

	file := filepath.Join(t.TempDir(), "lo.pcap")
	td := startTcpdump(t, tcpdump, file, pa, pb, pp)
	waitCapturing(t, td, file, probe)

	// The operations, all requested by a; minimum packet counts per
	// opcode (IBA 9.4: a message of n bytes takes ceil(n/MTU) packets; a
	// SEND or WRITE is acknowledged at least once, a READ is answered by
	// ceil(n/MTU) responses, an atomic by one ATOMIC ACKNOWLEDGE).
	const (
		sendLen  = 200
		writeLen = 3 * 1024 // FIRST, MIDDLE, LAST
		readLen  = 3*1024 + 100
		off      = 128
		atomicAt = 32 << 10 // remote word
		resultAt = 40 << 10 // local result
	)
	want := map[string]int{
		"RC_SEND_ONLY_WITH_IMMEDIATE":  1,
		"RC_RDMA_WRITE_FIRST":          1,
		"RC_RDMA_WRITE_MIDDLE":         writeLen/m - 2,
		"RC_RDMA_WRITE_LAST":           1,
		"RC_RDMA_READ_REQUEST":         1,
		"RC_RDMA_READ_RESPONSE_FIRST":  1,
		"RC_RDMA_READ_RESPONSE_MIDDLE": (readLen+m-1)/m - 2,
		"RC_RDMA_READ_RESPONSE_LAST":   1,
		"RC_ACKNOWLEDGE":               2, // the SEND and the WRITE
		"RC_FETCH_ADD":                 1,
		"RC_COMPARE_SWAP":              1,
		"RC_ATOMIC_ACKNOWLEDGE":        2,
	}
	wantPkts := 0
	for _, n := range want {
		wantPkts += n
	}

	// SEND with immediate. Payloads are pseudo-random but the same in
	// every run, so what Wireshark's payload heuristics make of them does
	// not change from run to run.
	prng := rand.New(rand.NewPCG(1, 2))
	fill := func(p []byte) {
		for i := range p {
			p[i] = byte(prng.Uint32())
		}
	}
	fill(a.buf[off : off+sendLen])
	loSync(a, b)
	_, err = b.qp.PostRecv(rxe.RecvWR{ID: 1, SGList: []rxe.SGE{b.mr.SGE(off, sendLen)}})
	require.NoError(t, err)
	_, err = a.qp.PostSend(rxe.SendWR{ID: 1, Opcode: rxe.WRSendWithImm, Flags: rxe.SendSignaled,
		SGList: []rxe.SGE{a.mr.SGE(off, sendLen)}, Imm: 0x01020304})
	require.NoError(t, err)
	loWait(t, a, "SEND")
	rwc := loWait(t, b, "receive")
	require.Equal(t, uint32(0x01020304), rwc.Imm)
	loSync(a, b)
	require.Equal(t, a.buf[off:off+sendLen], b.buf[off:off+sendLen])

	// RDMA WRITE of three MTUs.
	fill(a.buf[off : off+writeLen])
	loSync(a, b)
	_, err = a.qp.PostSend(rxe.SendWR{ID: 2, Opcode: rxe.WRRDMAWrite, Flags: rxe.SendSignaled,
		SGList: []rxe.SGE{a.mr.SGE(off, writeLen)}, RemoteAddr: b.mr.Addr() + off, RKey: b.mr.RKey()})
	require.NoError(t, err)
	loWait(t, a, "RDMA WRITE")
	loSync(a, b)
	require.Equal(t, a.buf[off:off+writeLen], b.buf[off:off+writeLen])

	// RDMA READ of a bit more than three MTUs.
	fill(b.buf[off : off+readLen])
	clear(a.buf[off : off+readLen])
	loSync(a, b)
	_, err = a.qp.PostSend(rxe.SendWR{ID: 3, Opcode: rxe.WRRDMARead, Flags: rxe.SendSignaled,
		SGList: []rxe.SGE{a.mr.SGE(off, readLen)}, RemoteAddr: b.mr.Addr() + off, RKey: b.mr.RKey()})
	require.NoError(t, err)
	loWait(t, a, "RDMA READ")
	loSync(a, b)
	require.Equal(t, b.buf[off:off+readLen], a.buf[off:off+readLen])

	// FETCH_ADD then COMPARE_SWAP.
	binary.NativeEndian.PutUint64(b.buf[atomicAt:], 100)
	loSync(a, b)
	for i, wr := range []rxe.SendWR{
		{Opcode: rxe.WRAtomicFetchAndAdd, CompareAdd: 5},
		{Opcode: rxe.WRAtomicCmpAndSwp, CompareAdd: 105, Swap: 7},
	} {
		wr.ID, wr.Flags = uint64(4+i), rxe.SendSignaled
		wr.SGList = []rxe.SGE{a.mr.SGE(resultAt, 8)}
		wr.RemoteAddr, wr.RKey = b.mr.Addr()+atomicAt, b.mr.RKey()
		_, err = a.qp.PostSend(wr)
		require.NoError(t, err)
		loWait(t, a, wr.Opcode.String())
		loSync(a, b)
		require.Equal(t, []uint64{100, 105}[i], binary.NativeEndian.Uint64(a.buf[resultAt:]))
	}
	require.Equal(t, uint64(7), binary.NativeEndian.Uint64(b.buf[atomicAt:]))

	// Every packet either device sent crosses lo once. Wait until tcpdump
	// has written them all and the devices have been quiet for a moment (a
	// late duplicate, say an ACK repeated for a retransmitted request,
	// can follow the last completion), then stop it.
	sent := func() int { return int(a.dev.Counters().SentPkts + b.dev.Counters().SentPkts) }
	deadline := time.Now().Add(10 * time.Second)
	var settled time.Time // since when the file has held every packet sent
	for last := -1; ; {
		c, _ := readLoCapture(file, pp)
		n, s := len(c.roce), sent()
		if n < s || s != last {
			settled = time.Now()
		} else if time.Since(settled) >= 100*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tcpdump wrote %d of our frames in 10s; the devices sent %d packets\n%s", n, s, td.stop(t))
		}
		last = s
		time.Sleep(10 * time.Millisecond)
	}
	stats := td.stop(t)
	// tcpdump's "received by filter" and "dropped by kernel" also count
	// what crossed lo before its filter was set: only the file tells.
	t.Logf("tcpdump: %s", strings.Join(strings.Fields(stats), " "))
	capt, err := readLoCapture(file, pp)
	require.NoError(t, err)
	require.Equal(t, sent(), len(capt.roce), "frames captured, packets the devices sent")
	t.Logf("capture: %d frames: %d probes, %d RoCE (a sent %d, b sent %d)", capt.frames, capt.probes, len(capt.roce),
		a.dev.Counters().SentPkts, b.dev.Counters().SentPkts)

	// rxectl dump --json: every packet decoded, every ICRC valid.
	portArgs := []string{"--port", strconv.Itoa(int(pa)), "--port", strconv.Itoa(int(pb))}
	stdout, stderr, code := runCmd(t, append([]string{"dump", "--json", file}, portArgs...)...)
	require.Equal(t, cli.ExitOK, code, stderr)
	objs := decodeJSONLines(t, stdout)
	t.Logf("rxectl dump: %s", strings.TrimSpace(stderr))
	require.Equal(t, fmt.Sprintf("rxectl dump: %d frames, %d RoCEv2 packets, 0 bad ICRC, 0 malformed\n", capt.frames, len(capt.roce)),
		stderr, "every captured frame but the probes is one of our RoCEv2 packets")
	require.Len(t, objs, len(capt.roce))
	require.GreaterOrEqual(t, len(objs), wantPkts)
	got := map[string]int{}
	for _, o := range objs {
		require.NotContains(t, o, "error", "malformed: %v", o)
		require.Equal(t, true, o["icrc_ok"], "ICRC of %v", o)
		op, _ := o["opcode"].(string)
		got[op]++
		// a requests, b responds.
		if strings.Contains(op, "RESPONSE") || strings.Contains(op, "ACKNOWLEDGE") {
			require.Equal(t, b.dev.Addr().String(), o["src"], "%v", o)
			require.Equal(t, a.dev.Addr().String(), o["dst"], "%v", o)
		} else {
			require.Equal(t, a.dev.Addr().String(), o["src"], "%v", o)
			require.Equal(t, b.dev.Addr().String(), o["dst"], "%v", o)
		}
	}
	t.Logf("opcodes: %v", got)
	for op, n := range want {
		require.GreaterOrEqual(t, got[op], n, "%s packets", op)
	}
	require.Len(t, got, len(want), "no other opcodes: %v", got)

	// --strict agrees.
	_, stderr, code = runCmd(t, append([]string{"dump", "--strict", file}, portArgs...)...)
	require.Equal(t, cli.ExitOK, code, stderr)

	// IPv4 ID 0 with DF on every packet (docs/icrc.md, "Sending").
	for i, ip := range capt.roce {
		require.NotNil(t, ip, "RoCE frame %d has no IPv4 header", i+1)
		require.NotZero(t, ip.Flags&layers.IPv4DontFragment, "RoCE frame %d: DF not set (flags %v)", i+1, ip.Flags)
		require.Zero(t, ip.Id, "RoCE frame %d: IPv4 ID", i+1)
	}

	if tshark, err := exec.LookPath("tshark"); err == nil {
		checkTshark(t, tshark, file, len(capt.roce), pp, pa, pb)
	} else {
		t.Log("tshark not installed: Wireshark's check skipped")
	}
}

// checkTshark decodes file with tshark, the ports as RoCEv2, and requires
// every frame but the probes (from probePort) to decode as Ethernet, IPv4,
// UDP and InfiniBand (then payload data), with nothing malformed and no
// expert error (testutil.RequireRoCEFrames).
func checkTshark(t *testing.T, tshark, file string, frames int, probePort uint16, ports ...uint16) {
	t.Helper()
	testutil.RequireRoCEFrames(t, tshark, file, frames, fmt.Sprintf("!(udp.srcport==%d)", probePort), ports...)
}
