package perftest

import (
	"context"
	"io"
	"net"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/rxe"
)

// loopbackEnds parses cmd's args with --udp-port port and returns the test
// and the options of a server on 127.0.0.1 and a client on 127.0.0.2 that
// leave their sessions in *server and *client, split as --loopback splits
// them (splitLoopback).
func loopbackEnds(t *testing.T, cmd, port string, args []string, client, server **session) (pt Test, so, co options) {
	t.Helper()
	pt = findTest(t, cmd)
	o, err := parsePerftest(pt, append([]string{"--udp-port", port}, args...))
	require.NoError(t, err)
	so, co = splitLoopback(o, server, client)
	co.host = "127.0.0.1"
	return pt, so, co
}

// loopbackSessions runs cmd with args between a server and a client in
// this process, as --loopback does, and returns both ends' sessions (their
// devices closed, their counters kept).
func loopbackSessions(t *testing.T, cmd string, args ...string) (client, server *session) {
	t.Helper()
	return loopbackSessionsHooked(t, nil, cmd, args...)
}

// loopbackSessionsHooked is loopbackSessions with connected, when not nil,
// as both ends' hooks.connected.
func loopbackSessionsHooked(t *testing.T, connected func(*session), cmd string, args ...string) (client, server *session) {
	t.Helper()
	pt, so, co := loopbackEnds(t, cmd, "0", args, &client, &server)
	so.hooks.connected, co.hooks.connected = connected, connected
	runEnds(t, pt, &so, &co)
	require.NotNil(t, client)
	require.NotNil(t, server)
	return client, server
}

// runEnds runs the server so and the client co of pt over TCP on
// 127.0.0.1 in this process and requires both to succeed; a client's
// failure is reported with the server's error, often its cause.
func runEnds(t *testing.T, pt Test, so, co *options) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srvErr := make(chan error, 1)
	go func() { srvErr <- runServer(ctx, pt, so, io.Discard, ln) }()
	co.oobPort = ln.Addr().(*net.TCPAddr).Port
	if err := runClient(ctx, pt, co, io.Discard); err != nil {
		cancel() // a server still waiting for the client ends too
		require.NoError(t, err, "server: %v", <-srvErr)
	}
	require.NoError(t, <-srvErr)
}

// loopbackCMSessions is loopbackSessions with -R: the server and the client
// connect over rdma_cm between 127.0.0.1 and 127.0.0.2, as runLoopbackCM.
func loopbackCMSessions(t *testing.T, cmd string, args ...string) (client, server *session) {
	t.Helper()
	return loopbackCMSessionsHooked(t, nil, cmd, args...)
}

// loopbackCMSessionsHooked is loopbackCMSessions with connected, when not
// nil, as both ends' hooks.connected.
func loopbackCMSessionsHooked(t *testing.T, connected func(*session), cmd string, args ...string) (client, server *session) {
	t.Helper()
	pt, so, co := loopbackEnds(t, cmd, sharedUDPPort(t), args, &client, &server)
	so.hooks.connected, co.hooks.connected = connected, connected
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ready := make(chan uint16, 1)
	srvErr := make(chan error, 1)
	go func() { srvErr <- runCMReady(ctx, pt, &so, false, io.Discard, ready) }()
	select {
	case <-ready:
	case err := <-srvErr:
		t.Fatalf("the -R server ended before listening: %v", err)
	}
	require.NoError(t, runCMReady(ctx, pt, &co, true, io.Discard, nil))
	require.NoError(t, <-srvErr)
	require.NotNil(t, client)
	require.NotNil(t, server)
	return client, server
}

// vectorsOf returns the distinct completion vectors of cqs.
func vectorsOf(cqs []*rxe.CQ) map[int]bool {
	m := map[int]bool{}
	for _, cq := range cqs {
		m[cq.Vector()] = true
	}
	return m
}

// busyVectors counts the device's vectors that sent datagrams.
func busyVectors(s *session) int {
	n := 0
	for _, v := range s.dev.Vectors() {
		if v.SentPkts > 0 {
			n++
		}
	}
	return n
}

// TestMultiQPVectors runs the BW tests with -q 2 to 4, with and without
// -R: every QP has
// CQs of its own, the QPs are spread over the device's vectors (one per
// core by default: GOMAXPROCS), the loop serves them all and counts every
// iteration.
func TestMultiQPVectors(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("GOMAXPROCS 1: the device has one completion vector")
	}
	const iters = 300
	for _, tc := range []struct {
		cmd  string
		qps  int
		args []string
	}{
		{"write-bw", 2, nil},
		{"write-bw", 4, nil},
		{"read-bw", 2, nil},
		{"read-bw", 4, []string{"-D", "1"}},
		{"send-bw", 2, nil},
		{"send-bw", 4, []string{"-e"}},
		{"write-bw", 3, []string{"-e"}},
		{"send-bw", 2, []string{"-b"}},
		{"send-bw", 2, []string{"-b", "-e"}},
		// -R: rdma_cm connects the QPs on the same CQs (AcceptFunc).
		{"write-bw", 2, []string{"-R"}},
		{"send-bw", 3, []string{"-R"}},
		{"read-bw", 2, []string{"-R", "-e"}},
	} {
		t.Run(tc.cmd+"/q"+strconv.Itoa(tc.qps)+"/"+strconv.Itoa(len(tc.args)), func(t *testing.T) {
			t.Parallel()
			// -u 20 (a 4.3 s ACK timeout): a machine loaded by other tests
			// can stall the peer past 7 retries of the default 67 ms.
			args := append([]string{"-q", strconv.Itoa(tc.qps), "-s", "4096", "-n", strconv.Itoa(iters), "-u", "20"}, tc.args...)
			sessions := loopbackSessions
			if slices.Contains(tc.args, "-R") {
				sessions = loopbackCMSessions
			}
			var cs, ss *session
			var clk *steppedClock
			if slices.Contains(tc.args, "-D") {
				// The client's duration loop on the test's clock: its
				// window counts some completions however slow the host
				// is (a real second can pass before the first on a
				// loaded one, as it can under perftest).
				pt, so, co := loopbackEnds(t, tc.cmd, "0", args, &cs, &ss)
				clk = stepClock(&co, 200*time.Millisecond) // 4 waits in the window of -D 1
				runEnds(t, pt, &so, &co)
			} else {
				cs, ss = sessions(t, tc.cmd, args...)
			}
			for _, s := range []*session{cs, ss} {
				require.Len(t, s.sset.cqs, tc.qps)
				require.Len(t, s.rset.cqs, tc.qps)
				distinct := map[*rxe.CQ]bool{}
				for i, qp := range s.qps {
					distinct[s.sset.cqs[i]] = true
					require.Equal(t, s.sset.cqs[i].Vector(), s.rset.cqs[i].Vector(), "QP %d: send and receive CQ on one vector", qp.QPN())
				}
				require.Len(t, distinct, tc.qps, "one send CQ per QP")
				require.Greater(t, len(vectorsOf(s.rset.cqs)), 1)
				require.Greater(t, busyVectors(s), 1, "%+v", s.dev.Vectors())
			}
			if clk != nil {
				require.Len(t, cs.bwResults, 1)
				require.Positive(t, clk.counted, "completions in the window")
				require.Equal(t, clk.counted*uint64(cs.o.cqMod), cs.bwResults[0].Iters, "cq-mod requests counted per completion in the window")
				return
			}
			require.Len(t, cs.bwResults, 1)
			want := uint64(iters * tc.qps)
			require.Equal(t, want, cs.bwResults[0].Iters)
			if tc.cmd == "send-bw" && !slices.Contains(tc.args, "-b") {
				require.Equal(t, want, ss.bwResults[0].Iters, "the server received every message")
			}
		})
	}
}

// TestSingleQPCQs checks that -q 1 keeps one send CQ (and, in a SEND test,
// one receive CQ), each on the least-used vector at its creation, as before
// CQs per QP.
func TestSingleQPCQs(t *testing.T) {
	for _, cmd := range []string{"write-bw", "send-bw", "send-lat"} {
		t.Run(cmd, func(t *testing.T) {
			t.Parallel()
			cs, ss := loopbackSessions(t, cmd, "-n", "50")
			for _, s := range []*session{cs, ss} {
				require.Len(t, s.sset.cqs, 1)
				require.Len(t, s.rset.cqs, 1)
				require.Same(t, s.scq, s.sset.cqs[0])
				require.Same(t, s.rcq, s.rset.cqs[0])
				require.Equal(t, 0, s.scq.Vector())
				if s.t.verb == verbSend && s.dev.Attr().NumCompVectors > 1 {
					require.NotSame(t, s.scq, s.rcq)
					require.Equal(t, 1, s.rcq.Vector())
				} else if s.t.verb != verbSend {
					require.Same(t, s.scq, s.rcq)
				}
			}
		})
	}
}

// TestCQVectorFlag: -X puts every CQ of a run on the vector it names, as
// perftest creates its CQs on -X's; without it each QP's CQs go to the
// least-used vector; a vector the device lacks is refused.
func TestCQVectorFlag(t *testing.T) {
	vecSession := func(args ...string) *session {
		conn, _ := netdev.NewPipe()
		dev, err := rxe.Open(conn, rxe.Options{OwnConn: true, CompVectors: 4})
		require.NoError(t, err)
		t.Cleanup(func() { dev.Close() })
		o, err := parsePerftest(findTest(t, "send-bw"), args)
		require.NoError(t, err)
		return &session{t: findTest(t, "send-bw"), o: o, dev: dev}
	}
	vectors := func(s *session) (v []int) {
		for _, cq := range append(s.sset.cqs, s.rset.cqs...) {
			v = append(v, cq.Vector())
		}
		return v
	}
	s := vecSession("-q", "3", "-X", "2")
	require.NoError(t, s.createCQs(3))
	require.Equal(t, []int{2, 2, 2, 2, 2, 2}, vectors(s))
	s = vecSession("-X", "3")
	require.NoError(t, s.createCQs(1))
	require.Equal(t, []int{3, 3}, vectors(s))
	s = vecSession("-q", "3")
	require.NoError(t, s.createCQs(3))
	v := vectors(s)
	require.Equal(t, v[:3], v[3:], "a QP's send CQ on its receive CQ's vector")
	require.Len(t, slices.Compact(slices.Sorted(slices.Values(v[:3]))), 3, "three QPs on three vectors: %v", v)
	s = vecSession("-X", "4")
	require.ErrorContains(t, s.createCQs(1), "-X 4: the device has 4 completion vectors, 0 to 3")
}
