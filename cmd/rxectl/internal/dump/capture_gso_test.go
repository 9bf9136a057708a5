//go:build linux

package dump

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/internal/netns"
	"github.com/gorxe/gorxe/internal/syncbuf"
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe"
	"github.com/stretchr/testify/require"
)

// TestGSOWireCapture runs RDMA WRITE, READ and SEND between two devices
// with UDP GSO and GRO on (rxe.Listen's default), each in its own network
// namespace, over a veth pair whose tx-udp-segmentation is off on both
// ends: the kernel segments every GSO buffer before the capture point, as
// for a NIC without UDP segmentation offload, so tcpdump on the veth sees
// what a peer would receive. Every captured packet must be one RoCE packet
// whose ICRC verifies with its real IP header (IPv4 ID included), some of
// them with non-zero IDs (GSO segments); rxectl dump --strict must agree,
// and tshark, when installed, must find nothing malformed.
func TestGSOWireCapture(t *testing.T) {
	if err := netns.Check("tcpdump", "ethtool"); err != nil {
		t.Skip(err)
	}
	p, err := netns.NewPair(fmt.Sprintf("gorxe-wire-%d", os.Getpid()), 203)
	require.NoError(t, err)
	defer p.Close()
	for _, side := range [][2]string{{p.A, p.IfA}, {p.B, p.IfB}} {
		_, err := netns.Command("ip", "netns", "exec", side[0], "ethtool", "-K", side[1], "tx-udp-segmentation", "off")
		require.NoError(t, err)
	}
	file := filepath.Join(t.TempDir(), "veth.pcap")
	td := startNetnsTcpdump(t, p.A, p.IfA, file)

	var a, b *loEnd
	require.NoError(t, netns.In(p.A, func() error { a = newGSOEnd(t, p.AddrA, "rxe-a"); return nil }))
	require.NoError(t, netns.In(p.B, func() error { b = newGSOEnd(t, p.AddrB, "rxe-b"); return nil }))
	const mtu = rxe.MTU1024 // the veth's 1500 bytes
	ia, ib := a.qp.Info(rand.Uint32()), b.qp.Info(rand.Uint32())
	require.NoError(t, a.qp.Connect(ia, ib, rxe.ConnectOptions{MTU: mtu}))
	require.NoError(t, b.qp.Connect(ib, ia, rxe.ConnectOptions{MTU: mtu}))

	const msg = 64 << 10
	for i := range 4 {
		_, err := b.qp.PostRecv(rxe.RecvWR{ID: uint64(i), SGList: []rxe.SGE{b.mr.SGE(0, msg)}})
		require.NoError(t, err)
	}
	for i, op := range []rxe.WROpcode{rxe.WRRDMAWrite, rxe.WRRDMARead, rxe.WRSend, rxe.WRRDMAWrite, rxe.WRRDMARead, rxe.WRSend} {
		_, err := a.qp.PostSend(rxe.SendWR{ID: uint64(i), Opcode: op, Flags: rxe.SendSignaled,
			SGList: []rxe.SGE{a.mr.SGE(0, msg)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
		require.NoError(t, err)
		loWait(t, a, op.String())
	}

	// Wait until the file holds every packet both devices sent and has
	// stopped growing, then stop tcpdump.
	sent := func() int { return int(a.dev.Counters().SentPkts + b.dev.Counters().SentPkts) }
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, _ := readLoCapture(file, 0)
		if len(c.roce) >= sent() {
			time.Sleep(100 * time.Millisecond)
			if c2, _ := readLoCapture(file, 0); len(c2.roce) == len(c.roce) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("tcpdump wrote %d frames in 10s; the devices sent %d packets\n%s", len(c.roce), sent(), td.stop(t))
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("tcpdump: %s", strings.Join(strings.Fields(td.stop(t)), " "))
	capt, err := readLoCapture(file, 0)
	require.NoError(t, err)
	require.Equal(t, sent(), len(capt.roce), "one frame per RoCE packet")

	// Every frame's ICRC verifies over its real IP header.
	frames := readPcap(t, file)
	nonZeroID := 0
	for i, f := range frames {
		d, err := packet.ParseIP(f.data[14:]) // Ethernet
		require.NoError(t, err, "frame %d", i+1)
		require.True(t, d.ICRCOK(), "frame %d: ICRC (IPv4 ID %#x)", i+1, d.Pseudo.IPID)
		require.Equal(t, uint16(packet.IPv4FlagDF), d.Pseudo.IPFlags, "frame %d", i+1)
		if d.Pseudo.IPID != 0 {
			nonZeroID++
		}
	}
	t.Logf("%d frames, %d with a non-zero IPv4 ID (GSO segments)", len(frames), nonZeroID)
	require.Positive(t, nonZeroID, "GSO segments carry IDs 1, 2, ...")

	_, stderr, code := runCmd(t, "dump", "--strict", file)
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Contains(t, stderr, " 0 bad ICRC, 0 malformed")
	if tshark, err := exec.LookPath("tshark"); err == nil {
		checkTshark(t, tshark, file, len(frames), 0, packet.UDPPort)
	} else {
		t.Log("tshark not installed: Wireshark's check skipped")
	}
}

// newGSOEnd listens on addr:4791 in the calling thread's namespace with
// rxe.Listen's defaults (GSO and GRO on) and makes an RC QP and an MR.
func newGSOEnd(t *testing.T, addr netip.Addr, name string) *loEnd {
	dev, err := rxe.Listen(netip.AddrPortFrom(addr, packet.UDPPort), rxe.Options{Name: name, LinkMTU: 1500})
	require.NoError(t, err)
	return newRCEnd(t, dev)
}

// startNetnsTcpdump starts tcpdump on iface in namespace ns, writing UDP
// port 4791 to file, and returns once it is listening (the namespace has no
// other traffic, so its ring starts empty). The ring is 64 MiB (-B): the
// transfer comes in bursts faster than tcpdump writes.
func startNetnsTcpdump(t *testing.T, ns, iface, file string) *tcpdumpRun {
	t.Helper()
	args := []string{"netns", "exec", ns, "tcpdump", "-i", iface, "-B", "65536", "--immediate-mode", "-U", "-s", "0", "-Z", "root",
		"-w", file, "udp port 4791"}
	cmd := exec.Command("ip", args...)
	run := &tcpdumpRun{cmd: cmd, done: make(chan error, 1)}
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	go func() {
		err := cmd.Wait()
		run.stderr.WriteString(stderr.String())
		run.done <- err
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), "listening on "+iface) {
		select {
		case err := <-run.done:
			t.Fatalf("tcpdump exited before listening: %v\n%s", err, run.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("tcpdump did not say it was listening within 10s\n%s", stderr.String())
		}
	}
	return run
}
