package rxe

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/stretchr/testify/require"
)

// cmChildEnv names the environment variable that makes
// TestDialAcceptTwoProcesses the server process: its value is the server
// device's address.
const cmChildEnv = "GORXE_CM_TEST_SERVER"

// TestDialAcceptTwoProcesses connects two processes over loopback UDP with
// Dial and Accept: this test binary runs itself again as the server
// (127.0.13.2), which accepts, receives a SEND, answers with an RDMA WRITE
// with immediate into the region the client named in its private data, and waits for the
// client's disconnect. The client disconnects only after the server said
// its WRITE completed: a DREQ that overtakes the WRITE's ACK moves the
// server's QP to ERR and flushes the WRITE (WR_FLUSH_ERR), as on any RDMA
// device. Every wait is bounded.
func TestDialAcceptTwoProcesses(t *testing.T) {
	if addr := os.Getenv(cmChildEnv); addr != "" {
		cmServerProcess(t, netip.MustParseAddrPort(addr))
		return
	}
	if testing.Short() {
		t.Skip("starts a second process")
	}
	// Both devices use one UDP port (CM MADs go to the device's own
	// port): find one free on both addresses, keep the client's.
	var ca netdev.Conn
	var srv netip.AddrPort
	for port := 25791; port < 25891; port++ {
		c, err := netdev.ListenUDP(netip.AddrPortFrom(netip.MustParseAddr("127.0.13.1"), uint16(port)), netdev.Options{BlockingWrite: true})
		if err != nil {
			continue
		}
		srv = netip.AddrPortFrom(netip.MustParseAddr("127.0.13.2"), uint16(port))
		probe, err := netdev.ListenUDP(srv, netdev.Options{})
		if err != nil {
			c.Close()
			continue
		}
		probe.Close()
		ca = c
		break
	}
	require.NotNil(t, ca, "no UDP port free on 127.0.13.1 and 127.0.13.2")
	da, err := Open(ca, Options{Name: "cm-client", LinkMTU: 9000, OwnConn: true})
	require.NoError(t, err)
	defer da.Close()
	client := newCMEnd(t, da)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestDialAcceptTwoProcesses$", "-test.v")
	cmd.Env = append(os.Environ(), cmChildEnv+"="+srv.String())
	// The server's stdout is read line by line here; its stderr goes to
	// stderrLog. Both are read by this goroutine only after done (or in a
	// failure message, where a torn read does no harm beyond the message).
	var stdoutLog strings.Builder
	var stderrLog bytes.Buffer
	cmd.Stderr = &stderrLog
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	type exit struct {
		err error
		out string
	}
	done := make(chan exit, 1)
	ready, wrote := make(chan struct{}), make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			stdoutLog.WriteString(sc.Text() + "\n")
			switch {
			case strings.HasPrefix(sc.Text(), "listening"):
				close(ready)
			case sc.Text() == "wrote":
				close(wrote)
			}
		}
		done <- exit{cmd.Wait(), stdoutLog.String()}
	}()
	select {
	case <-ready:
	case e := <-done:
		t.Fatalf("the server process ended before listening: %v\n%s%s", e.err, e.out, stderrLog.String())
	case <-ctx.Done():
		t.Fatal("the server process did not listen in time")
	}

	// The private data names the client's region for the server's WRITE.
	pdata := binary.BigEndian.AppendUint64(nil, client.mr.Addr()+512)
	pdata = binary.BigEndian.AppendUint32(pdata, client.mr.RKey())
	cc, err := Dial(ctx, da, srv.Addr().String()+":7471", CMOptions{PD: client.pd, SendCQ: client.cq, PrivateData: pdata})
	require.NoError(t, err, "Dial to the server process")
	require.Equal(t, []byte("welcome"), cc.PrivateData[:7])
	// A receive for the server's WRITE with immediate: its completion says
	// the data has landed.
	_, err = cc.QP.PostRecv(RecvWR{ID: 9})
	require.NoError(t, err)
	copy(client.buf, "ping")
	_, err = cc.QP.PostSend(SendWR{ID: 1, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{{Addr: client.mr.Addr(), Length: 4, LKey: client.mr.LKey()}}})
	require.NoError(t, err)
	got := map[WCOpcode]WC{}
	for range 2 {
		wc := waitWC(t, client.cq)
		got[wc.Opcode] = wc
	}
	require.Equal(t, WCSuccess, got[WCSend].Status)
	require.Equal(t, WCSuccess, got[WCRecvRDMAWithImm].Status)
	require.Equal(t, uint32(0x706f6e67), got[WCRecvRDMAWithImm].Imm)
	cc.QP.Query() // orders this goroutine with the device's writes
	require.Equal(t, "pong", string(client.buf[512:516]))
	select {
	case <-wrote:
	case e := <-done:
		t.Fatalf("the server process ended before its WRITE completed: %v\n%s%s", e.err, e.out, stderrLog.String())
	case <-ctx.Done():
		t.Fatal("the server's WRITE did not complete in time")
	}
	require.NoError(t, cc.Disconnect(ctx))
	select {
	case e := <-done:
		require.NoError(t, e.err, "the server process failed:\n%s%s", e.out, stderrLog.String())
		require.Contains(t, e.out, "server done", "the server process:\n%s%s", e.out, stderrLog.String())
	case <-ctx.Done():
		t.Fatal("the server process did not end")
	}
}

// cmServerProcess is the server side of TestDialAcceptTwoProcesses, run in
// the second process.
func cmServerProcess(t *testing.T, addr netip.AddrPort) {
	conn, err := netdev.ListenUDP(addr, netdev.Options{BlockingWrite: true})
	require.NoError(t, err)
	db, err := Open(conn, Options{Name: "cm-server", LinkMTU: 9000, OwnConn: true})
	require.NoError(t, err)
	defer db.Close()
	server := newCMEnd(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := db.ListenCM(7471, CMOptions{PD: server.pd, SendCQ: server.cq, PrivateData: []byte("welcome")})
	require.NoError(t, err)
	defer l.Close()
	os.Stdout.WriteString("listening on " + strconv.Quote(addr.String()) + "\n")
	sc, err := l.Accept(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(sc.PrivateData), 12)
	raddr, rkey := binary.BigEndian.Uint64(sc.PrivateData), binary.BigEndian.Uint32(sc.PrivateData[8:])
	_, err = sc.QP.PostRecv(RecvWR{ID: 1, SGList: []SGE{{Addr: server.mr.Addr(), Length: 64, LKey: server.mr.LKey()}}})
	require.NoError(t, err)
	wc := waitWC(t, server.cq)
	require.Equal(t, WCSuccess, wc.Status)
	sc.QP.Query()
	require.Equal(t, "ping", string(server.buf[:wc.ByteLen]))
	copy(server.buf[1024:], "pong")
	_, err = sc.QP.PostSend(SendWR{ID: 2, Opcode: WRRDMAWriteWithImm, Flags: SendSignaled, RemoteAddr: raddr, RKey: rkey, Imm: 0x706f6e67,
		SGList: []SGE{{Addr: server.mr.Addr() + 1024, Length: 4, LKey: server.mr.LKey()}}})
	require.NoError(t, err)
	require.Equal(t, WCSuccess, waitWC(t, server.cq).Status)
	os.Stdout.WriteString("wrote\n")
	select {
	case <-sc.Done():
	case <-ctx.Done():
		t.Fatal("the client's disconnect did not arrive")
	}
	os.Stdout.WriteString("server done\n")
}
