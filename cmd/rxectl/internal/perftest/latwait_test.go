package perftest

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/oob"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/rxe"
)

// latTestSession is one end of a latency test whose peer never answers:
// a device on one end of a pipe nobody serves, its CQs, a QP in RESET
// and a registered buffer.
func latTestSession(t *testing.T, verb string, client, events bool) *session {
	t.Helper()
	conn, _ := netdev.NewPipe()
	dev, err := rxe.Open(conn, rxe.Options{OwnConn: true})
	require.NoError(t, err)
	t.Cleanup(func() { dev.Close() })
	s := &session{t: findTest(t, verb), o: &options{iters: 100, rxDepth: 16, cqMod: 1, qps: 1},
		client: client, dev: dev, rem: make([]oob.KeyMsg, 1), buffSize: 64, mtu: 3}
	if events {
		s.ch = rxe.NewCompChannel(4)
	}
	s.pd, err = dev.AllocPD()
	require.NoError(t, err)
	s.mr, err = s.pd.RegMR(make([]byte, 2*s.buffSize), rxe.AccessLocalWrite|rxe.AccessRemoteWrite)
	require.NoError(t, err)
	s.scq, err = dev.CreateCQWith(rxe.CQAttr{CQE: 16, Vector: -1, Channel: s.ch})
	require.NoError(t, err)
	s.rcq = s.scq
	qp, err := s.pd.CreateQP(rxe.QPInitAttr{Type: rxe.QPTypeRC, SendCQ: s.scq, RecvCQ: s.rcq,
		Cap: rxe.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	require.NoError(t, err)
	s.qps = []*rxe.QP{qp}
	return s
}

// TestLatDeadPeer: a latency test whose peer sends nothing ends with an
// error once its stall bound has passed, whether it waits in CQ.Wait,
// busy-polls (--busy-poll) or sleeps on the completion channel (-e), and
// promptly with "interrupted" when its
// context ends.
func TestLatDeadPeer(t *testing.T) {
	const bound = 300 * time.Millisecond
	for _, tc := range []struct {
		verb   string
		client bool // the side that waits for the peer first
		want   string
	}{
		{"send-lat", false, "the peer stopped"},
		{"write-lat", true, "no RDMA WRITE 1 from the peer"},
	} {
		for _, mode := range []string{"wait", "busy-poll", "events"} {
			t.Run(tc.verb+"/"+mode, func(t *testing.T) {
				s := latModeSession(t, tc.verb, tc.client, mode)
				s.latStall = bound
				run := s.runLatSend
				if tc.verb == "write-lat" {
					run = s.runLatWrite
				}
				start := time.Now()
				_, err := run(context.Background(), 2)
				require.ErrorContains(t, err, tc.want)
				require.ErrorContains(t, err, bound.String())
				require.Less(t, time.Since(start), 30*time.Second, "the run outlived its stall bound by far")

				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				s.latStall = time.Hour
				_, err = run(ctx, 2)
				require.ErrorContains(t, err, "interrupted")
			})
		}
	}
}

// TestLatEventsSleep: with -e a latency test's wait sleeps on the
// completion channel; it never spins. In a synctest bubble the fake clock
// moves only once every goroutine is durably blocked, so the hour-long
// stall bound passes at once if and only if the wait sleeps (a spinning
// wait would keep the clock still and never return).
func TestLatEventsSleep(t *testing.T) {
	s := latTestSession(t, "send-lat", false, false)
	done := make(chan error, 1)
	go func() {
		synctest.Test(t, func(t *testing.T) {
			ch := rxe.NewCompChannel(4)
			cq, err := s.dev.CreateCQWith(rxe.CQAttr{CQE: 4, Vector: -1, Channel: ch})
			require.NoError(t, err)
			es := &session{o: s.o, ch: ch, latStall: time.Hour}
			start := time.Now()
			err = es.spinPoll(context.Background(), cq, make([]rxe.WC, 1), "the peer's SEND 1", true)
			require.ErrorContains(t, err, "nothing for 1h0m0s while waiting for the peer's SEND 1")
			require.Equal(t, time.Hour, time.Since(start))
			require.NoError(t, cq.Destroy())
		})
		done <- nil
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the -e wait did not sleep: its hour-long bound never passed on the bubble's clock")
	}
}

// TestBusyPollFlag: --busy-poll runs the latency tests to the end, with a
// short spin (then CQ.Wait) and with one longer than any wait (spinning
// only, on CQ.BusyPoll, which reads the socket: both ends of --loopback
// spin in this process), and is refused when negative, together with -e,
// or on a bandwidth test (which would ignore it).
func TestBusyPollFlag(t *testing.T) {
	for _, cmd := range []string{"send-lat", "write-lat", "read-lat"} {
		for _, spin := range []string{"50us", "1s"} {
			// -u 18: an ACK timeout of about 1 s, not 67 ms; under -race on
			// a loaded 2-CPU machine a round trip has taken over half a
			// second, which spends the default retry budget. -n 50: a
			// spinning end's run costs about its iterations under load.
			out, errOut, code := runCmd(t, cmd, "--loopback", "--udp-port", "0", "-n", "50", "--busy-poll", spin, "-u", "18")
			require.Zero(t, code, errOut)
			require.Contains(t, out, "t_typical")
		}
	}
	for _, tc := range []struct{ cmd, args, want []string }{
		{[]string{"send-lat"}, []string{"--busy-poll", "-1ms"}, []string{"not negative"}},
		{[]string{"send-lat"}, []string{"--busy-poll", "1ms", "-e"}, []string{"give one of them"}},
		{[]string{"write-bw"}, []string{"--busy-poll", "1ms"}, []string{"applies to the latency tests", "write-bw waits in CQ.Wait"}},
	} {
		args := append(append(tc.cmd, "--loopback", "--udp-port", "0", "-n", "200"), tc.args...)
		_, errOut, code := runCmd(t, args...)
		require.NotZero(t, code)
		for _, w := range tc.want {
			require.Contains(t, errOut, w)
		}
	}
}

// TestBusyPollDefault: the latency tests spin by default (defBusyPoll), as
// perftest spins on ibv_poll_cq; -e, the bandwidth tests and --busy-poll 0
// sleep, and without --busy-poll on the command line a CQ whose socket the
// spinner cannot read (here a pipe's) is not spun on.
func TestBusyPollDefault(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		args []string
		want time.Duration
	}{
		{"send-lat", nil, defBusyPoll},
		{"write-lat", nil, defBusyPoll},
		{"read-lat", nil, defBusyPoll},
		{"atomic-lat", nil, defBusyPoll},
		{"send-lat", []string{"-c", "UD"}, defBusyPoll},
		{"send-lat", []string{"-e"}, 0},
		{"write-lat", []string{"--busy-poll", "0"}, 0},
		{"read-lat", []string{"--busy-poll", "20us"}, 20 * time.Microsecond},
		{"write-bw", nil, 0},
		{"read-bw", nil, 0},
		{"send-bw", nil, 0},
	} {
		t.Run(strings.Join(append([]string{tc.cmd}, tc.args...), " "), func(t *testing.T) {
			o, err := parsePerftest(findTest(t, tc.cmd), append([]string{"--loopback"}, tc.args...))
			require.NoError(t, err)
			require.Equal(t, tc.want, o.busyPoll)
		})
	}

	s := latTestSession(t, "send-lat", false, false)
	require.False(t, s.rcq.PollsSocket())
	s.o.busyPoll = defBusyPoll
	require.Zero(t, s.spinFor(s.rcq), "the default spin on a CQ that cannot read its socket")
	s.o.set = map[string]bool{"busy-poll": true}
	require.Equal(t, defBusyPoll, s.spinFor(s.rcq), "--busy-poll given")
}

// TestCQPollingReported: the header and --json say how a latency test
// waited, and the default spin is left out while a device of the process
// has sockets no spinner reads: a capture or fault rules that queue
// received packets (with --loopback on the client's device only, yet the
// server does not spin either), or read-lat's answering end. A closed
// device's sockets stop counting.
func TestCQPollingReported(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		cmd        string
		args       []string
		want, peer string // the client's and the loopback server's cq_polling
		header     string
	}{
		{"send-lat", nil, "busy", "busy", "busy (spins up to 1s a completion, reading the socket)"},
		{"write-lat", nil, "busy", "busy", "busy (spins up to 1s a completion, reading the socket)"},
		{"send-lat", []string{"--pcap", filepath.Join(dir, "a.pcap")}, "wait", "wait", "wait (CQ.Wait: the default does not spin"},
		{"send-lat", []string{"--reorder", "0.01,by=2"}, "wait", "wait", "wait (CQ.Wait: the default does not spin"},
		{"send-lat", []string{"--drop", "0.001,dir=recv"}, "busy", "busy", "busy (spins"},
		{"send-lat", []string{"--busy-poll", "0"}, "wait", "wait", "wait (CQ.Wait)"},
		{"send-lat", []string{"--pcap", filepath.Join(dir, "b.pcap"), "--busy-poll", "1ms"}, "busy", "busy", "busy (spins up to 1ms a completion; the device's goroutines read the socket)"},
		{"send-lat", []string{"-e"}, "events", "events", "events (-e"},
		// read-lat's server waits for no completion: it spins reading its
		// socket and answers there (answerLoop), so the client spins too.
		{"read-lat", nil, "busy", "busy", "busy (spins up to 1s a completion, reading the socket)"},
		{"atomic-lat", nil, "busy", "busy", "busy (spins up to 1s a completion, reading the socket)"},
		{"read-lat", []string{"--busy-poll", "0"}, "wait", "", "wait (CQ.Wait)"},
		{"read-lat", []string{"-e"}, "events", "", "events (-e"},
		{"read-lat", []string{"--pcap", filepath.Join(dir, "c.pcap")}, "wait", "", "wait (CQ.Wait: the default does not spin"},
	} {
		t.Run(strings.Join(append([]string{tc.cmd}, tc.args...), " "), func(t *testing.T) {
			// -u 18 (1.07 s, 8.6 s of retries): both ends spin in this
			// process, and under -race beside other packages' tests one
			// run lost its ACKs for the default's 0.5 s (RETRY_EXC_ERR);
			// this test is about the report, not the timing. -n 50: a
			// spinning end's run costs about its iterations under load.
			args := append([]string{tc.cmd, "--loopback", "--udp-port", "0", "-n", "50", "-u", "18"}, tc.args...)
			out, errOut, code := runCmd(t, args...)
			require.Zero(t, code, errOut)
			require.Contains(t, out, " CQ polling      : "+tc.header)
			out, errOut, code = runCmd(t, append(args, "--json")...)
			require.Zero(t, code, errOut)
			var doc struct {
				Polling     string        `json:"cq_polling"`
				PeerPolling string        `json:"peer_cq_polling"`
				Device      report.Device `json:"device"`
				PeerDevice  report.Device `json:"peer_device"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
			require.Equal(t, tc.want, doc.Polling)
			require.Equal(t, tc.peer, doc.PeerPolling)
			// A spinning end reads its socket itself (unless a capture
			// sits on it): the datagrams it handled so are counted.
			for _, d := range []struct {
				mode string
				dev  report.Device
			}{{doc.Polling, doc.Device}, {doc.PeerPolling, doc.PeerDevice}} {
				if d.mode == "busy" && !strings.Contains(tc.header, "device's goroutines read") {
					require.Positive(t, d.dev.PolledPkts, "a spinning end read nothing itself")
				}
				if d.mode != "busy" {
					// Only a QP's read before acting on a timer
					// (rxe.Counters.PolledPkts) reads without a spinner.
					require.Less(t, 2*d.dev.PolledPkts, d.dev.RcvdPkts, "an end that does not spin read its socket")
				}
			}
			require.Zero(t, unreadSockets.Load(), "a closed device's sockets still counted")
		})
	}
}

// TestLatPeerLeft: a latency test waiting for its peer's message ends
// soon after the peer closes the exchange's connection (it failed or was
// killed), with errPeerDone, however long its stall bound; an interrupt
// still reads "interrupted".
func TestLatPeerLeft(t *testing.T) {
	for _, tc := range []struct {
		verb   string
		client bool // the side that waits for the peer first
		want   string
	}{
		{"send-lat", false, "waiting for the peer's SEND 1: the peer closed the exchange"},
		{"write-lat", true, "waiting for the peer's RDMA WRITE 1: the peer closed the exchange"},
	} {
		for _, mode := range []string{"wait", "busy-poll", "events"} {
			t.Run(tc.verb+"/"+mode, func(t *testing.T) {
				s := latModeSession(t, tc.verb, tc.client, mode)
				s.latStall = time.Hour
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				require.NoError(t, err)
				defer ln.Close()
				peer, err := net.Dial("tcp", ln.Addr().String())
				require.NoError(t, err)
				s.conn, err = ln.Accept()
				require.NoError(t, err)
				defer s.conn.Close()
				run := s.runLatSend
				if tc.verb == "write-lat" {
					run = s.runLatWrite
				}
				done := make(chan error, 1)
				go func() {
					_, err := run(context.Background(), 2)
					done <- err
				}()
				time.Sleep(50 * time.Millisecond) // waiting
				peer.Close()
				select {
				case err = <-done:
				case <-time.After(10 * time.Second):
					t.Fatal("still waiting 10 s after the peer closed the exchange")
				}
				require.ErrorIs(t, err, errPeerDone)
				require.ErrorContains(t, err, tc.want)
				require.Nil(t, s.peerDone, "the watch ended with the run")
			})
		}
	}
}

// latModeSession is latTestSession waiting in mode: "wait", "busy-poll"
// (a one-second spin, longer than the tests' bounds, so the spin ends at
// ctx; given on the command line, it spins although the pipe's CQ cannot
// read a socket: spinFor) or "events" (-e).
func latModeSession(t *testing.T, verb string, client bool, mode string) *session {
	t.Helper()
	s := latTestSession(t, verb, client, mode == "events")
	if mode == "busy-poll" {
		s.o.busyPoll, s.o.set = time.Second, map[string]bool{"busy-poll": true}
	}
	s.choosePolling()
	return s
}
