package perftest

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/internal/syncbuf"
	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/rxe"
)

// sharedUDPPort returns a UDP port free on both 127.0.0.1 and 127.0.0.2:
// the RDMA CM sends to the peer's UDP port as its own, so both ends of an
// -R test use the same one.
func sharedUDPPort(t *testing.T) string {
	t.Helper()
	for range 20 {
		a, err := net.ListenPacket("udp4", "127.0.0.1:0")
		require.NoError(t, err)
		port := a.LocalAddr().(*net.UDPAddr).Port
		b, err := net.ListenPacket("udp4", "127.0.0.2:"+strconv.Itoa(port))
		a.Close()
		if err == nil {
			b.Close()
			return strconv.Itoa(port)
		}
	}
	t.Fatal("no UDP port free on both 127.0.0.1 and 127.0.0.2")
	return ""
}

// TestRDMACMLoopback runs every program with -R --loopback: the header says
// rdma_cm, and a result row follows. With --udp-port 0 the server's device
// takes an ephemeral port and the client the same one on 127.0.0.2
// (runLoopbackCM), since the CM reaches the peer on the client's own port.
func TestRDMACMLoopback(t *testing.T) {
	for _, pt := range Tests {
		t.Run(pt.cmd, func(t *testing.T) {
			out, errs, code := runCmd(t, pt.cmd, "-R", "--loopback", "--udp-port", "0", "-n", "20")
			require.Equal(t, cli.ExitOK, code, errs)
			require.Contains(t, out, "\n rdma_cm QPs\t : ON\n Data ex. method : rdma_cm\n")
			require.Regexp(t, regexp.MustCompile(`(?m)^ \d+\s+20\s+\d`), out)
			require.Contains(t, out, " local address: LID 0000 QPN ")
			require.Contains(t, out, " remote address: LID 0000 QPN ")
		})
	}
}

// runCMEnds runs an -R server and client in this process (RoCE between
// 127.0.0.1 and 127.0.0.2) and returns both outputs.
func runCMEnds(t *testing.T, srvCmd, cliCmd string, srvArgs, cliArgs []string) (srvOut, cliOut string, srvErr, cliErr error) {
	t.Helper()
	return runCMEndsWith(t, srvCmd, cliCmd, srvArgs, cliArgs, nil)
}

// runCMEndsWith is runCMEnds with the parsed options of both ends
// changed by set first (tests' hooks).
func runCMEndsWith(t *testing.T, srvCmd, cliCmd string, srvArgs, cliArgs []string, set func(so, co *options)) (srvOut, cliOut string, srvErr, cliErr error) {
	t.Helper()
	pt, ct := findTest(t, srvCmd), findTest(t, cliCmd)
	so, err := parsePerftest(pt, srvArgs)
	require.NoError(t, err)
	co, err := parsePerftest(ct, cliArgs)
	require.NoError(t, err)
	if set != nil {
		set(so, co)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var sb, cb bytes.Buffer
	ready := make(chan uint16, 1)
	done := make(chan error, 1)
	go func() { done <- runCMReady(ctx, pt, so, false, &sb, ready) }()
	select {
	case <-ready:
		cliErr = runCMReady(ctx, ct, co, true, &cb, nil)
	case err := <-done:
		done <- err
	}
	srvErr = <-done
	return sb.String(), cb.String(), srvErr, cliErr
}

// cmEndsInterrupted runs an -R server and client of cmd with args in this
// process (RoCE between 127.0.0.1 and 127.0.0.2), interrupts the client
// (as the first Ctrl-C) and returns both outputs (stdout and stderr) and
// errors, and how long both took to end after the interrupt (0 without
// one). A bandwidth client is interrupted at its first send completion
// (hooks.sent), a latency client 300 ms after its table header. Each end
// gets at most testutil.Bound().
func cmEndsInterrupted(t *testing.T, cmd string, args ...string) (srvOut, cliOut string, srvErr, cliErr error, ended time.Duration) {
	t.Helper()
	pt := findTest(t, cmd)
	// The interrupt is the subject, not the retries: an ACK timeout that
	// outlasts a loaded host's stalls (args may set another).
	common := append([]string{"-R", "--udp-port", sharedUDPPort(t), "-u", testutil.QPTimeoutArg}, args...)
	so, err := parsePerftest(pt, append([]string{"--bind", "127.0.0.1"}, common...))
	require.NoError(t, err)
	co, err := parsePerftest(pt, append([]string{"--bind", "127.0.0.2", "127.0.0.1"}, common...))
	require.NoError(t, err)
	var sb, cb syncbuf.Buffer
	so.stderr, co.stderr = &sb, &cb
	sctx, scancel := context.WithTimeout(context.Background(), testutil.Bound())
	defer scancel()
	cctx, ccancel := context.WithTimeout(context.Background(), testutil.Bound())
	defer ccancel()
	interrupted := make(chan time.Time, 1)
	var once sync.Once
	interrupt := func() {
		once.Do(func() {
			interrupted <- time.Now()
			ccancel()
		})
	}
	if !pt.lat {
		co.hooks.sent = func(n int) {
			if n > 0 {
				interrupt()
			}
		}
	} else {
		go func() {
			for cctx.Err() == nil && !strings.Contains(cb.String(), " #bytes") {
				time.Sleep(10 * time.Millisecond)
			}
			if cctx.Err() != nil {
				return
			}
			time.Sleep(300 * time.Millisecond)
			interrupt()
		}()
	}
	ready := make(chan uint16, 1)
	done := make(chan error, 1)
	go func() { done <- runCMReady(sctx, pt, so, false, &sb, ready) }()
	select {
	case <-ready:
		cliErr = runCMReady(cctx, pt, co, true, &cb, nil)
	case err := <-done:
		done <- err
	}
	srvErr = <-done
	select {
	case at := <-interrupted:
		ended = time.Since(at)
	default:
	}
	return sb.String(), cb.String(), srvErr, cliErr, ended
}

// TestRDMACMClientServer: an -R server and client, two QPs, with the
// client's capture showing the exchange as perftest -R puts it on the
// wire: CM REQ/REP/RTU of the exchange's connection, its SENDs of the
// version (16 B), page and cache line sizes (4 B), MTU (2 B) and the
// binary key messages (56 B), then the test QPs' connections.
func TestRDMACMClientServer(t *testing.T) {
	port := sharedUDPPort(t)
	pcap := filepath.Join(t.TempDir(), "cm.pcap")
	common := []string{"-R", "--udp-port", port, "-n", "50", "-s", "4096", "-q", "2", "--gso=off"}
	srvOut, cliOut, serr, cerr := runCMEnds(t, "send-bw", "send-bw",
		append([]string{"--bind", "127.0.0.1"}, common...),
		append([]string{"127.0.0.1", "--bind", "127.0.0.2", "--pcap", pcap}, common...))
	require.NoError(t, cerr)
	require.NoError(t, serr)
	for _, out := range []string{srvOut, cliOut} {
		require.Contains(t, out, " rdma_cm QPs\t : ON\n")
		require.Regexp(t, regexp.MustCompile(`(?m)^ 4096\s+(50|100)\s+\d`), out)
		require.Equal(t, 2, strings.Count(out, " remote address:"))
	}
	dumped, errs, code := runCmd(t, "dump", "--port", port, pcap)
	require.Equal(t, cli.ExitOK, code, errs)
	var seq []string
	seen := map[string]bool{} // a retransmitted SEND counts once
	cmRE, sendRE := regexp.MustCompile(`cm=(\w+)`), regexp.MustCompile(`(\S+ → \S+) RC_SEND_ONLY .*psn=(\d+) .*payload=(\d+) `)
	for _, line := range strings.Split(dumped, "\n") {
		if m := cmRE.FindStringSubmatch(line); m != nil {
			seq = append(seq, m[1])
		} else if m := sendRE.FindStringSubmatch(line); m != nil && m[3] != "4096" && !seen[m[1]+m[2]] {
			seen[m[1]+m[2]] = true
			seq = append(seq, m[3])
		}
	}
	// The capture orders a datagram sent and one received at about the
	// same time either way, so the CM messages of a connection are
	// checked by where their REQs fall, not their exact order.
	var sizes []string
	var reqAt []int // the number of SENDs before each REQ
	for _, e := range seq {
		switch e {
		case "REQ":
			reqAt = append(reqAt, len(sizes))
		case "REP", "RTU", "DREQ", "DREP":
		default:
			sizes = append(sizes, e)
		}
	}
	require.GreaterOrEqual(t, len(sizes), 12, dumped)
	require.Equal(t, []string{"16", "16", "4", "4", "4", "4", "2", "2", "56", "56", "56", "56"}, sizes[:12])
	require.Len(t, reqAt, 3)
	require.Equal(t, 0, reqAt[0], "the exchange's connection comes first")
	for _, at := range reqAt[1:] {
		// After the zeroed key exchange (the peer's message may be
		// captured just after the REQ it caused).
		require.Contains(t, []int{9, 10}, at, "the test QPs' connections follow the first key exchange")
	}
	require.Equal(t, 3, strings.Count(strings.Join(seq, " "), "RTU"))
	require.Contains(t, seq, "DREQ")
	require.Contains(t, seq, "DREP")
}

// TestRDMACMRefused: a client toward a device where no -R server listens
// fails at once with the REJ's reason, after perftest's retries.
func TestRDMACMRefused(t *testing.T) {
	port := sharedUDPPort(t)
	p, _ := strconv.Atoi(port)
	conn, err := netdev.ListenUDP(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(p)), netdev.Options{})
	require.NoError(t, err)
	dev, err := rxe.Open(conn, rxe.Options{OwnConn: true})
	require.NoError(t, err)
	defer dev.Close()
	start := time.Now()
	_, errs, code := runCmd(t, "send-bw", "127.0.0.1", "-R", "--bind", "127.0.0.2", "--udp-port", port)
	require.Equal(t, cli.ExitFail, code)
	require.Contains(t, errs, "rdma_cm connect to 127.0.0.1:18515: refused 10 times, nobody listens on RDMA CM port 18515")
	require.Less(t, time.Since(start), 30*time.Second)
}

// TestRDMACMToItself: a client whose server address is its own device's
// address (a server and a client on one host without --bind) fails at
// once, naming the cause, instead of being refused by its own device ten
// times; for RC and for UD, whose exchange connection is dialled first.
func TestRDMACMToItself(t *testing.T) {
	port := sharedUDPPort(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"RC", []string{"send-bw", "127.0.0.2", "-R", "--bind", "127.0.0.2", "--udp-port", port}},
		{"UD", []string{"send-bw", "127.0.0.2", "-R", "-c", "UD", "--bind", "127.0.0.2", "--udp-port", port}},
		{"name", []string{"read-bw", "localhost", "-R", "--bind", "127.0.0.1", "--udp-port", port}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, code := runCmd(t, tc.args...)
			require.Equal(t, cli.ExitFail, code)
			require.Contains(t, errs, "is this client's own RoCE address")
			require.Contains(t, errs, "--bind")
			require.NotContains(t, errs, "refused", "it sent requests to itself before it failed")
		})
	}
}

// TestRDMACMOptions: what -R refuses.
func TestRDMACMOptions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"send-bw", "-R", "-c", "UC", "--loopback"}, "-R with -c UC: librdmacm has no UC"},
		{[]string{"write-bw", "-R", "-c", "UC", "--loopback"}, "-R with -c UC"},
		{[]string{"send-bw", "-R", "--loopback", "--ipv6"}, "-R with --loopback --ipv6"},
		{[]string{"read-lat", "-R", "--udp-port", "0", "127.0.0.1"}, "-R with --udp-port 0: the RDMA CM reaches the peer on this end's own UDP port"},
		{[]string{"read-lat", "-R", "--udp-port", "0"}, "-R with --udp-port 0"},
	} {
		_, errs, code := runCmd(t, tc.args...)
		require.Equal(t, cli.ExitUsage, code, tc.args)
		require.Contains(t, errs, tc.want)
	}
}

// TestRDMACMPeerFails: the ends run different tests; the one that fails
// first disconnects, so the other fails too instead of waiting.
func TestRDMACMPeerFails(t *testing.T) {
	port := sharedUDPPort(t)
	common := []string{"-R", "--udp-port", port, "-n", "20"}
	start := time.Now()
	_, _, serr, cerr := runCMEnds(t, "send-bw", "write-bw",
		append([]string{"--bind", "127.0.0.1"}, common...),
		append([]string{"127.0.0.1", "--bind", "127.0.0.2"}, common...))
	require.Error(t, cerr)
	require.ErrorContains(t, serr, "the peer closed the connection")
	require.Less(t, time.Since(start), 30*time.Second)
}

// TestCMExchangeBoundsSilence: an -R end waiting for its peer's next
// exchange message gives up once no packet has come from the peer or gone
// to it on any of its connections for the silence bound (a peer killed
// outright sends no DREQ), and not while the peer's requests still arrive
// on a test QP: here the client's SENDs on a second connection, one
// every 25 ms for 0.6 s, keep the server's wait going past two silence
// bounds of 250 ms (a bound ten times the SENDs' interval, so that a
// loaded machine's scheduling gaps do not end it early).
func TestCMExchangeBoundsSilence(t *testing.T) {
	da, db := pipeDevices(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type end struct {
		pd       *rxe.PD
		mr       *rxe.MR
		scq, rcq *rxe.CQ
	}
	newEnd := func(d *rxe.Device) end {
		pd, err := d.AllocPD()
		require.NoError(t, err)
		mr, err := pd.RegMR(make([]byte, (1+cmRecvs)*cmSlot), rxe.AccessLocalWrite)
		require.NoError(t, err)
		scq, err := d.CreateCQ(64, -1)
		require.NoError(t, err)
		rcq, err := d.CreateCQ(64, -1)
		require.NoError(t, err)
		return end{pd, mr, scq, rcq}
	}
	cli, srv := newEnd(da), newEnd(db)
	l, err := db.ListenCM(7490, rxe.CMOptions{PD: srv.pd, SendCQ: srv.scq, RecvCQ: srv.rcq})
	require.NoError(t, err)
	defer l.Close()
	// Two connections: the exchange's and one test QP's.
	var conns [2][2]*rxe.CMConn // [connection][client, server]
	for i := range conns {
		done := make(chan error, 1)
		go func() {
			c, err := rxe.Dial(ctx, da, db.Addr().Addr().String()+":7490", rxe.CMOptions{PD: cli.pd, SendCQ: cli.scq, RecvCQ: cli.rcq})
			conns[i][0] = c
			done <- err
		}()
		// The test QP's receives complete on a CQ of their own.
		tcq, err := db.CreateCQ(64, -1)
		require.NoError(t, err)
		o := rxe.CMOptions{PD: srv.pd, SendCQ: srv.scq, RecvCQ: srv.rcq}
		if i == 1 {
			o.SendCQ, o.RecvCQ = tcq, tcq
		}
		sc, err := l.AcceptWith(ctx, o)
		require.NoError(t, err)
		require.NoError(t, <-done)
		conns[i][1] = sc
	}
	test := conns[1]
	for i := range 32 {
		_, err := test[1].QP.PostRecv(rxe.RecvWR{ID: uint64(100 + i), SGList: []rxe.SGE{srv.mr.SGE(0, cmSlot)}})
		require.NoError(t, err)
	}
	p := &cmPipe{st: &cmState{conns: []*rxe.CMConn{test[1]}, silence: 250 * time.Millisecond},
		conn: conns[0][1], mr: srv.mr, scq: srv.scq, rcq: srv.rcq, stop: ctx}
	for i := 1; i <= cmRecvs; i++ {
		require.NoError(t, p.post(i))
	}

	const talk = 600 * time.Millisecond
	start := time.Now()
	go func() {
		for time.Since(start) < talk {
			_, err := test[0].QP.PostSend(rxe.SendWR{Opcode: rxe.WRSend, SGList: []rxe.SGE{cli.mr.SGE(0, 8)}})
			if err != nil {
				return
			}
			time.Sleep(25 * time.Millisecond)
		}
	}()
	err = p.Recv(make([]byte, 8))
	took := time.Since(start)
	var silent errPeerSilent
	require.ErrorAs(t, err, &silent)
	require.Contains(t, err.Error(), "no packet from or to the peer on any connection for 250ms")
	require.GreaterOrEqual(t, took, talk, "the wait went on while the peer's SENDs arrived")
	require.Less(t, took, talk+5*time.Second)
}

// TestRDMACMServerClientGone: an -R server waiting for its client's
// requests for the test QPs (REQs for RC, SIDR_REQs for UD) ends with an
// error that names what happened once the client is gone, instead of
// waiting until it is interrupted: the client disconnected the
// exchange's connection (it runs another -c, finds nobody listening for
// its requests, and fails after its retries), or nothing came from it
// for the silence bound (1 s here: --drop on the client's sends takes
// every UD_SEND_ONLY after the exchange's REQ and RTU, its requests and
// its DREQ included, as from a client killed outright). A client whose
// server went away then ends on the server's DREQ, not at its own Dial's
// 10 s bound.
func TestRDMACMServerClientGone(t *testing.T) {
	silent := []string{"--drop", "UD_SEND_ONLY#3-1000000,dir=send"}
	for _, tc := range []struct {
		name          string
		srv, cli      []string
		want, wantCli string
	}{
		{"RC client disconnects", nil, []string{"-c", "UD"},
			"rdma_cm connection of test QP 0: no connection request from the client: the client disconnected the exchange's rdma_cm connection", ""},
		{"UD client disconnects", []string{"-c", "UD"}, nil,
			"rdma_cm resolution of UD test QP 0: no request from the client: the client disconnected the exchange's rdma_cm connection", ""},
		{"RC client silent", nil, silent,
			"rdma_cm connection of test QP 0: no connection request from the client: no packet from or to the peer on any connection for 1s",
			"rdma_cm connection of test QP 0: the server disconnected the exchange's rdma_cm connection"},
		{"UD client silent", []string{"-c", "UD"}, append([]string{"-c", "UD"}, silent...),
			"rdma_cm resolution of UD test QP 0: no request from the client: no packet from or to the peer on any connection for 1s",
			"rdma_cm resolution of UD test QP 0: the server disconnected the exchange's rdma_cm connection"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pt := findTest(t, "send-bw")
			port := sharedUDPPort(t)
			so, err := parsePerftest(pt, append([]string{"--bind", "127.0.0.1", "-R", "--udp-port", port}, tc.srv...))
			require.NoError(t, err)
			co, err := parsePerftest(pt, append([]string{"127.0.0.1", "--bind", "127.0.0.2", "-R", "--udp-port", port}, tc.cli...))
			require.NoError(t, err)
			so.hooks.silence = time.Second
			// Bounds of the test only: each end is to end well before.
			sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer scancel()
			cctx, ccancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer ccancel()
			ready := make(chan uint16, 1)
			done := make(chan error, 1)
			var sb, cb syncbuf.Buffer
			go func() { done <- runCMReady(sctx, pt, so, false, &sb, ready) }()
			select {
			case <-ready:
			case err := <-done:
				t.Fatalf("the server ended before listening: %v", err)
			}
			start := time.Now()
			cliDone := make(chan error, 1)
			go func() { cliDone <- runCMReady(cctx, pt, co, true, &cb, nil) }()
			serr := <-done
			srvTook := time.Since(start)
			cerr := <-cliDone
			cliTook := time.Since(start)
			t.Logf("server after %v: %v; client after %v: %v", srvTook, serr, cliTook, cerr)
			require.ErrorContains(t, serr, tc.want)
			require.Less(t, srvTook, 15*time.Second, "the server waited until interrupted")
			require.Error(t, cerr)
			if tc.wantCli != "" {
				require.GreaterOrEqual(t, srvTook, time.Second, "not before the silence bound")
				require.ErrorContains(t, cerr, tc.wantCli)
				require.Less(t, cliTook, cmDialTimeout, "the client waited for its Dial's bound")
			}
		})
	}
}

// TestCMSetupWatchEnds: the context of a server's wait for the peer
// outside the exchange (watchCMSetup) ends with the cause that names what
// happened, when it happened: the peer's DREQ on the exchange's
// connection at once, the exchange's QP in the error state with its
// connection up or the client's next exchange message with no request for
// the test QP at the next tick (a quarter of the silence bound, at most a
// second), the silence bound with nothing heard once it has passed. A
// message that follows the client's request (requested set) is that
// connection's client going on: the ticks that see it pending do not end
// the wait, and its packets restart the silence, so the wait ends as
// silent only a silence bound after it (no earlier than pre+silence; a
// watch that never ticked would not end at all). The watch runs in a
// synctest bubble, its ticks on the bubble's clock.
func TestCMSetupWatchEnds(t *testing.T) {
	// pre is how long the watch runs before the row acts: it must not end
	// on its own meanwhile.
	const pre = 100 * time.Millisecond
	// message sends the client's next exchange message (an empty SEND)
	// into a receive of the server's.
	message := func(t *testing.T, cli, srv *rxe.CMConn) {
		_, err := srv.QP.PostRecv(rxe.RecvWR{ID: 1})
		require.NoError(t, err)
		_, err = cli.QP.PostSend(rxe.SendWR{Opcode: rxe.WRSend})
		require.NoError(t, err)
	}
	for _, tc := range []struct {
		name    string
		silence time.Duration
		act     func(t *testing.T, cli, srv *rxe.CMConn, st *cmState)
		want    error
		// after and by bound when the watch ends, since it started.
		after, by time.Duration
	}{
		{"disconnect", 10 * time.Second, func(t *testing.T, cli, _ *rxe.CMConn, _ *cmState) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			require.NoError(t, cli.Disconnect(ctx))
		}, errExchangeEnded{"client"}, pre, pre},
		{"QP error", 4 * time.Second, func(t *testing.T, _, srv *rxe.CMConn, _ *cmState) {
			require.NoError(t, srv.QP.Modify(&rxe.QPAttr{State: rxe.QPSErr}, rxe.QPAttrState))
		}, errExchangeQPErr{}, pre, time.Second},
		{"message without request", 4 * time.Second, func(t *testing.T, cli, srv *rxe.CMConn, _ *cmState) {
			message(t, cli, srv)
		}, errExchangeAhead{}, pre, time.Second},
		{"message after request", 4 * time.Second, func(t *testing.T, cli, srv *rxe.CMConn, st *cmState) {
			st.requested.Store(true)
			message(t, cli, srv)
		}, errPeerSilent{4 * time.Second}, pre + 4*time.Second, pre + 5*time.Second},
		{"silence", 250 * time.Millisecond, func(*testing.T, *rxe.CMConn, *rxe.CMConn, *cmState) {},
			errPeerSilent{250 * time.Millisecond}, 250 * time.Millisecond, 250*time.Millisecond + 250*time.Millisecond/4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				da, db := pipeDevices(t)
				// A bound of the bubble's clock: the watch is to end well
				// before.
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				so := watchCMOptions(t, db)
				l, err := db.ListenCM(7492, so)
				require.NoError(t, err)
				defer l.Close()
				dialed := make(chan *rxe.CMConn, 1)
				go func() {
					c, err := rxe.Dial(ctx, da, db.Addr().Addr().String()+":7492", watchCMOptions(t, da))
					if err != nil {
						t.Errorf("dial: %v", err)
					}
					dialed <- c
				}()
				srv, err := l.Accept(ctx)
				require.NoError(t, err)
				cli := <-dialed
				require.NotNil(t, cli)

				st := &cmState{stop: ctx, silence: tc.silence}
				st.pipe = &cmPipe{st: st, conn: srv, rcq: so.RecvCQ}
				s := &session{dev: db, cm: st}
				start := time.Now()
				wctx, release := s.watchCMSetup()
				defer release()
				time.Sleep(pre)
				synctest.Wait()
				require.NoError(t, wctx.Err(), "the watch ended before anything happened: %v", context.Cause(wctx))
				tc.act(t, cli, srv, st)
				select {
				case <-wctx.Done():
				case <-ctx.Done():
					t.Fatal("the watch did not end")
				}
				took := time.Since(start)
				require.Equal(t, tc.want, setupCause(wctx))
				require.GreaterOrEqual(t, took, tc.after, "the watch ended too early")
				require.LessOrEqual(t, took, tc.by, "the watch ended late")
				if tc.name == "message after request" {
					require.Equal(t, 1, so.RecvCQ.Len(), "the message did not come")
				}
			})
		})
	}
}

// pipeDevices opens two devices, "cli" and "srv", over an in-memory pipe,
// closed when the test ends.
func pipeDevices(t *testing.T) (cli, srv *rxe.Device) {
	ca, cb := netdev.NewPipe()
	cli, err := rxe.Open(ca, rxe.Options{Name: "cli", OwnConn: true})
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	srv, err = rxe.Open(cb, rxe.Options{Name: "srv", OwnConn: true})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	return cli, srv
}

// watchCMOptions is what the setup-watch tests connect with: a PD of d
// and one CQ for both directions.
func watchCMOptions(t *testing.T, d *rxe.Device) rxe.CMOptions {
	pd, err := d.AllocPD()
	require.NoError(t, err)
	cq, err := d.CreateCQ(16, -1)
	require.NoError(t, err)
	return rxe.CMOptions{PD: pd, SendCQ: cq, RecvCQ: cq}
}
