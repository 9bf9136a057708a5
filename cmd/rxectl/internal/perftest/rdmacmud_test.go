package perftest

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/rxe"
)

// TestRDMACMUDLoopback runs the UD tests with -R --loopback: the header
// says rdma_cm, a result row follows, and every test QP has its address
// lines; the server sends back in the latency test and with -b, which it
// can only do to the address handle made from the client's QPN message.
func TestRDMACMUDLoopback(t *testing.T) {
	for _, args := range [][]string{
		{"send-bw"},
		{"send-bw", "-b"},
		{"send-bw", "-q", "2"},
		{"send-lat"},
		{"send-lat", "--use-srq"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out, errs, code := runCmd(t, append(args, "-c", "UD", "-R", "--loopback", "--udp-port", "0", "-n", "20")...)
			require.Equal(t, cli.ExitOK, code, errs)
			require.Contains(t, out, "\n rdma_cm QPs\t : ON\n Data ex. method : rdma_cm\n")
			require.Contains(t, out, " Connection type : UD\t")
			require.Regexp(t, regexp.MustCompile(`(?m)^ \d+\s+(20|40)\s+\d`), out)
			qps := 1
			if args[len(args)-1] == "2" {
				qps = 2
			}
			require.Equal(t, qps, strings.Count(out, " remote address: LID 0000 QPN "), out)
		})
	}
}

// TestRDMACMUDClientServer: an -R -c UD server and client (send-bw -b, two
// QPs) in this process, with the client's capture showing what perftest
// -R puts on the wire for UD: the exchange's RC connection (REQ, REP,
// RTU), then for each test QP a SIDR_REQ for RDMA_PS_UDP port 18515
// answered by a SIDR_REP with the server's QPN and RDMA_UDP_QKEY, and the
// client's QPN message (a UD SEND with immediate data, the QPN, 4 bytes),
// then the test's SENDs with that Q_Key.
func TestRDMACMUDClientServer(t *testing.T) {
	port := sharedUDPPort(t)
	pcap := filepath.Join(t.TempDir(), "cmud.pcap")
	common := []string{"-c", "UD", "-R", "-b", "--udp-port", port, "-n", "20", "-s", "1024", "-q", "2", "--gso=off"}
	srvOut, cliOut, serr, cerr := runCMEnds(t, "send-bw", "send-bw",
		append([]string{"--bind", "127.0.0.1"}, common...),
		append([]string{"127.0.0.1", "--bind", "127.0.0.2", "--pcap", pcap}, common...))
	require.NoError(t, cerr)
	require.NoError(t, serr)
	for _, out := range []string{srvOut, cliOut} {
		require.Contains(t, out, " rdma_cm QPs\t : ON\n")
		require.Equal(t, 2, strings.Count(out, " remote address:"))
	}
	dumped, errs, code := runCmd(t, "dump", "--port", port, pcap)
	require.Equal(t, cli.ExitOK, code, errs)
	var seq []string
	repQPN := map[string]bool{}
	cmRE := regexp.MustCompile(`cm=(\w+)`)
	sidrRE := regexp.MustCompile(`cm=SIDR_REQ .*sid=0x0000000001114853 \(udp:18515\)`)
	repRE := regexp.MustCompile(`cm=SIDR_REP .*status=0 \(valid\) sid=0x0000000001114853 \(udp:18515\) qpn=(0x[0-9a-f]+) qkey=0x01234567`)
	immRE := regexp.MustCompile(`127\.0\.0\.2:\d+ → 127\.0\.0\.1:\d+ UD_SEND_ONLY_WITH_IMMEDIATE qp=(0x[0-9a-f]+) .*qkey=0x01234567 srcqp=(0x[0-9a-f]+) imm=0x([0-9a-f]+) payload=4 `)
	dataRE := regexp.MustCompile(`UD_SEND_ONLY qp=(0x[0-9a-f]+) .*qkey=(0x[0-9a-f]+) .*payload=1024 `)
	for _, line := range strings.Split(dumped, "\n") {
		switch m := cmRE.FindStringSubmatch(line); {
		case m != nil && m[1] == "SIDR_REQ":
			require.Regexp(t, sidrRE, line)
			seq = append(seq, "SIDR_REQ")
		case m != nil && m[1] == "SIDR_REP":
			r := repRE.FindStringSubmatch(line)
			require.NotNil(t, r, line)
			repQPN[r[1]] = true
			seq = append(seq, "SIDR_REP")
		case m != nil:
			seq = append(seq, m[1])
		}
		if m := immRE.FindStringSubmatch(line); m != nil {
			require.True(t, repQPN[m[1]], "the QPN message goes to a QP a SIDR_REP named: %s", line)
			src, err := strconv.ParseUint(m[2][2:], 16, 32)
			require.NoError(t, err)
			imm, err := strconv.ParseUint(m[3], 16, 32)
			require.NoError(t, err)
			require.Equal(t, src, imm, "the immediate data is the sender's QPN")
			seq = append(seq, "QPN")
		}
		if m := dataRE.FindStringSubmatch(line); m != nil {
			require.Equal(t, "0x01234567", m[2], "the test's SENDs carry RDMA_UDP_QKEY: %s", line)
		}
	}
	require.Len(t, repQPN, 2, dumped)
	require.Equal(t, []string{"REQ", "REP", "RTU", "SIDR_REQ", "SIDR_REP", "QPN", "SIDR_REQ", "SIDR_REP", "QPN"}, seq[:9], dumped)
	require.Regexp(t, dataRE, dumped)
}

// TestRDMACMUDRefused: a UD client whose server listens on the port for
// RC connections only (an -R server of -c RC) gets "service ID not
// supported" for each SIDR_REQ, as from kernel ib_cm with no UD listener,
// and fails after perftest's retries (10, 100 ms apart), saying that the
// server, whose exchange's connection is up, takes no test QP on the port
// (it runs another -c), not that it runs fewer test QPs.
func TestRDMACMUDRefused(t *testing.T) {
	port := sharedUDPPort(t)
	pt := findTest(t, "send-bw")
	so, err := parsePerftest(pt, []string{"--bind", "127.0.0.1", "-R", "--udp-port", port})
	require.NoError(t, err)
	co, err := parsePerftest(pt, []string{"127.0.0.1", "--bind", "127.0.0.2", "-R", "-c", "UD", "--udp-port", port})
	require.NoError(t, err)
	// The server ends on the client's DREQ (TestRDMACMServerClientGone);
	// the test ends its context once the client is done, in case it
	// does not.
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	ready := make(chan uint16, 1)
	done := make(chan error, 1)
	var sb, cb bytes.Buffer
	go func() { done <- runCMReady(sctx, pt, so, false, &sb, ready) }()
	var cerr error
	start := time.Now()
	select {
	case <-ready:
		cerr = runCMReady(cctx, pt, co, true, &cb, nil)
	case err := <-done:
		t.Fatalf("the server ended before listening: %v", err)
	}
	scancel()
	require.Error(t, <-done)
	require.ErrorContains(t, cerr, "rdma_cm resolution of UD test QP 0: rdma_cm connect to 127.0.0.1:18515: refused 10 times (")
	require.ErrorContains(t, cerr, "the server, whose exchange connection is up, takes no test QP on RDMA CM port 18515: it runs another -c, or it does not listen")
	require.NotContains(t, cerr.Error(), "fewer")
	require.ErrorContains(t, cerr, "service ID not supported")
	require.Less(t, time.Since(start), 30*time.Second)
}

// TestCMExchangeBoundsSilenceUD is TestCMExchangeBoundsSilence for -c UD:
// the UD test QPs hold no connection, and the client's SENDs arriving on
// them (one every 25 ms for 0.6 s) keep the server's exchange wait going
// past two silence bounds of 250 ms; once they stop it ends.
func TestCMExchangeBoundsSilenceUD(t *testing.T) {
	da, db := pipeDevices(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type end struct {
		pd       *rxe.PD
		mr       *rxe.MR
		scq, rcq *rxe.CQ
		ud       *rxe.QP
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
		tcq, err := d.CreateCQ(64, -1) // the UD QP's completions
		require.NoError(t, err)
		ud, err := pd.CreateQP(rxe.QPInitAttr{Type: rxe.QPTypeUD, SendCQ: tcq, RecvCQ: tcq,
			Cap: rxe.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}})
		require.NoError(t, err)
		require.NoError(t, modifySteps(ud, []qpStep{
			{rxe.QPAttr{State: rxe.QPSInit, Port: 1, QKey: rxe.RDMAUDPQKey}, rxe.QPAttrState | rxe.QPAttrPKeyIndex | rxe.QPAttrPort | rxe.QPAttrQKey},
			{rxe.QPAttr{State: rxe.QPSRTR}, rxe.QPAttrState},
			{rxe.QPAttr{State: rxe.QPSRTS}, rxe.QPAttrState | rxe.QPAttrSQPSN},
		}))
		return end{pd, mr, scq, rcq, ud}
	}
	cli, srv := newEnd(da), newEnd(db)
	l, err := db.ListenCM(7491, rxe.CMOptions{PD: srv.pd, SendCQ: srv.scq, RecvCQ: srv.rcq})
	require.NoError(t, err)
	defer l.Close()
	done := make(chan error, 1)
	go func() {
		_, err := rxe.Dial(ctx, da, db.Addr().Addr().String()+":7491", rxe.CMOptions{PD: cli.pd, SendCQ: cli.scq, RecvCQ: cli.rcq})
		done <- err
	}()
	exch, err := l.Accept(ctx)
	require.NoError(t, err)
	require.NoError(t, <-done)
	for i := range 32 {
		_, err := srv.ud.PostRecv(rxe.RecvWR{ID: uint64(100 + i), SGList: []rxe.SGE{srv.mr.SGE(0, cmSlot)}})
		require.NoError(t, err)
	}
	p := &cmPipe{st: &cmState{udQPs: []*rxe.QP{srv.ud}, silence: 250 * time.Millisecond},
		conn: exch, mr: srv.mr, scq: srv.scq, rcq: srv.rcq, stop: ctx}
	for i := 1; i <= cmRecvs; i++ {
		require.NoError(t, p.post(i))
	}
	ah, err := cli.pd.CreateAH(rxe.AH{DGID: db.Addr().Addr(), UDPPort: db.Addr().Port()})
	require.NoError(t, err)

	const talk = 600 * time.Millisecond
	start := time.Now()
	go func() {
		for time.Since(start) < talk {
			_, err := cli.ud.PostSend(rxe.SendWR{Opcode: rxe.WRSend, AH: ah, RemoteQPN: srv.ud.QPN(), RemoteQKey: rxe.RDMAUDPQKey,
				SGList: []rxe.SGE{cli.mr.SGE(0, 8)}})
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
	require.GreaterOrEqual(t, took, talk, "the wait went on while the peer's UD SENDs arrived")
	require.Less(t, took, talk+5*time.Second)
}
