package perftest

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/oob"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
	"github.com/gorxe/gorxe/internal/syncbuf"
	"github.com/gorxe/gorxe/internal/testutil"
)

// promptly bounds how long after an interrupt both ends may take to end
// in the tests that check that the other end does not wait for its stall
// bound: stallTimeout, measured from the interrupt. An end that waits for
// the bound fails there with its own error, which these tests check too;
// ends that a loaded host left without a processor for seconds on the way
// (40 s after the interrupt, under -race with a load average of 25) do
// not.
const promptly = stallTimeout

// twoEnds runs a server and a client of cmd with args on both (RoCE
// between 127.0.0.1 and 127.0.0.2, ephemeral UDP ports). The client's
// context is cancelled (an interrupt, as the first Ctrl-C) once whenRows
// rows of its table are printed and then hold has passed. Both ends get
// at most testutil.Bound(). It returns each end's output (stdout and
// stderr) and error, and how long both took to end after the interrupt
// (0 without one).
func twoEnds(t *testing.T, cmd string, args []string, whenRows int, hold time.Duration) (cliOut, srvOut string, cerr, serr error, ended time.Duration) {
	t.Helper()
	return interruptedEnds(t, cmd, args, func(ctx context.Context, _ *options, cbuf *syncbuf.Buffer, interrupt func()) {
		go func() {
			row := cFormatRE(fmtReport)
			for ctx.Err() == nil {
				n := 0
				for _, l := range strings.Split(cbuf.String(), "\n") {
					if row.MatchString(l) || strings.HasPrefix(l, " #bytes") {
						n++
					}
				}
				if n > whenRows { // the table header, then whenRows rows
					time.Sleep(hold)
					interrupt()
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	})
}

// twoEndsFirstSent is twoEnds with the client interrupted as soon as a
// wait of its bandwidth loop has taken a send completion (hooks.sent):
// at least one message has then reached the server.
func twoEndsFirstSent(t *testing.T, cmd string, args []string) (cliOut, srvOut string, cerr, serr error, ended time.Duration) {
	t.Helper()
	return interruptedEnds(t, cmd, args, func(_ context.Context, co *options, _ *syncbuf.Buffer, interrupt func()) {
		co.hooks.sent = func(n int) {
			if n > 0 {
				interrupt()
			}
		}
	})
}

// interruptedEnds runs twoEnds' server and client after arm has been given
// the client's context, its options, its output and interrupt, which
// cancels its context (the first call only) and starts the clock of
// ended.
func interruptedEnds(t *testing.T, cmd string, args []string, arm func(ctx context.Context, co *options, cbuf *syncbuf.Buffer, interrupt func())) (cliOut, srvOut string, cerr, serr error, ended time.Duration) {
	t.Helper()
	pt := findTest(t, cmd)
	// The interrupt is the subject, not the retries: an ACK timeout that
	// outlasts a loaded host's stalls (args may set another).
	common := append([]string{"--udp-port", "0", "-u", testutil.QPTimeoutArg}, args...)
	so, err := parsePerftest(pt, append([]string{"--bind", "127.0.0.1"}, common...))
	require.NoError(t, err)
	co, err := parsePerftest(pt, append([]string{"--bind", "127.0.0.2"}, common...))
	require.NoError(t, err)
	var sbuf, cbuf syncbuf.Buffer
	so.stderr, co.stderr = &sbuf, &cbuf
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	co.host, co.oobPort = "127.0.0.1", ln.Addr().(*net.TCPAddr).Port

	sctx, scancel := context.WithTimeout(context.Background(), testutil.Bound())
	defer scancel()
	srvErr := make(chan error, 1)
	go func() { srvErr <- runServer(sctx, pt, so, &sbuf, ln) }()

	cctx, ccancel := context.WithTimeout(context.Background(), testutil.Bound())
	defer ccancel()
	interrupted := make(chan time.Time, 1)
	var once sync.Once
	arm(cctx, co, &cbuf, func() {
		once.Do(func() {
			interrupted <- time.Now()
			ccancel()
		})
	})
	cerr = runClient(cctx, pt, co, &cbuf)
	serr = <-srvErr
	select {
	case at := <-interrupted:
		ended = time.Since(at)
	default:
	}
	return cbuf.String(), sbuf.String(), cerr, serr, ended
}

// bwRows returns the fields of the BW rows of out.
func bwRows(t *testing.T, out string) [][]string {
	t.Helper()
	var rows [][]string
	re := cFormatRE(fmtReport)
	for _, l := range strings.Split(out, "\n") {
		if re.MatchString(l) {
			rows = append(rows, fields(t, re, l))
		}
	}
	return rows
}

// TestSendBWInterrupted: an interrupt during send-bw ends the client's
// measurement cleanly, as in the other bandwidth tests: it prints the
// row of what it sent and finishes the exchange, and the server, seeing
// the client done, prints the row of what arrived. Neither fails, and
// the server does not wait for the messages never sent. The interrupt
// comes right after the client's first send completion, so both rows
// count messages however slowly a loaded host starts the traffic, and a
// client that went on would send all of its -n (and, with -a, its sizes
// up to 8 MiB) or run its 30 s.
func TestSendBWInterrupted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"iterations", []string{"-n", "20000", "-s", "64"}},
		{"duration", []string{"-D", "30", "-f", "0", "-s", "4096"}},
		{"all sizes", []string{"-a", "-n", "1000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cout, sout, cerr, serr, ended := twoEndsFirstSent(t, "send-bw", tc.args)
			require.NoError(t, cerr, "client:\n%s", cout)
			require.NoError(t, serr, "server:\n%s", sout)
			require.Less(t, ended, promptly)
			for _, out := range []string{cout, sout} {
				rows := bwRows(t, out)
				require.NotEmpty(t, rows, out)
				require.NotEqual(t, "0", rows[len(rows)-1][1], "no message counted:\n%s", out)
				require.True(t, strings.HasSuffix(out, report.ResultLine+"\n"), out)
			}
			if tc.name == "iterations" {
				require.Contains(t, sout, " Received ")
				require.Contains(t, sout, " of 20000 messages of 64 bytes: the client stopped sending before the rest arrived\n")
			}
		})
	}
}

// TestSendBWRunInfinitelyServerRows: with --run_infinitely the send-bw
// server prints a row every -D seconds, as the client does, not only the
// first period's.
func TestSendBWRunInfinitelyServerRows(t *testing.T) {
	t.Parallel()
	cout, sout, cerr, serr, _ := twoEnds(t, "send-bw", []string{"--run_infinitely", "-D", "1", "-s", "4096"}, 2, 100*time.Millisecond)
	require.NoError(t, cerr, "client:\n%s", cout)
	require.NoError(t, serr, "server:\n%s", sout)
	require.GreaterOrEqual(t, len(bwRows(t, cout)), 3, cout) // two periods and the interrupted one
	rows := bwRows(t, sout)
	require.GreaterOrEqual(t, len(rows), 2, sout)
	for _, r := range rows[:2] {
		n, err := strconv.Atoi(r[1])
		require.NoError(t, err)
		require.Positive(t, n, sout)
	}
}

// TestSendBWInterruptedRDMACM: with -R, as over TCP, an interrupt of a
// send-bw client ends its measurement cleanly: the server watches the
// rdma_cm exchange (cmPipe.watch), sees the client's next message and
// ends with what arrived, in seconds, not after its minute-long stall
// bound; neither end fails.
func TestSendBWInterruptedRDMACM(t *testing.T) {
	sout, cout, serr, cerr, ended := cmEndsInterrupted(t, "send-bw", "-n", "20000", "-s", "64")
	require.NoError(t, cerr, "client:\n%s", cout)
	require.NoError(t, serr, "server:\n%s", sout)
	require.Less(t, ended, promptly)
	require.Contains(t, sout, " of 20000 messages of 64 bytes: the client stopped sending before the rest arrived\n")
	for _, out := range []string{cout, sout} {
		require.NotEmpty(t, bwRows(t, out), out)
		require.True(t, strings.HasSuffix(out, report.ResultLine+"\n"), out)
	}
}

// TestLatInterruptedRDMACM: with -R an interrupted latency client
// disconnects (CM DREQ), and the server, whose QP the DREQ moves to the
// error state, ends at once saying that the peer ended the exchange
// (watchLat over cmPipe.watch), not with a bare flush error.
func TestLatInterruptedRDMACM(t *testing.T) {
	for _, cmd := range []string{"send-lat", "write-lat"} {
		t.Run(cmd, func(t *testing.T) {
			sout, cout, serr, cerr, ended := cmEndsInterrupted(t, cmd, "-n", "2000000")
			require.ErrorContains(t, cerr, "interrupted", cout)
			require.ErrorIs(t, serr, errPeerDone, sout)
			require.Less(t, ended, promptly)
		})
	}
}

// TestBidirInterrupted: an interrupt of one end of a -b run ends the other
// end's run promptly too: it sees the interrupted end's next exchange
// message while its peer's requests are fewer than -n, stops posting, says
// so on stderr, and both ends print the rows of what they did and succeed,
// instead of the other end running its iterations to the end alone. With
// -a both ends end the run after that size (TestAllSizesInterrupted).
// With -D each end runs for its own duration, and the other end finishes
// its own.
// Without -a the interrupt comes at the interrupted end's first send
// completion (twoEndsFirstSent): the other end cannot have sent its
// million messages by the time that end's exchange message reaches it.
func TestBidirInterrupted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd  string
		args []string
		rows int // the interrupt comes after this many rows (0: at the first send completion)
	}{
		{"send-bw", []string{"-n", "1000000", "-s", "64"}, 0},
		{"write-bw", []string{"-n", "1000000", "-s", "64"}, 0},
		{"read-bw", []string{"-n", "1000000", "-s", "64"}, 0},
		{"write-bw", []string{"-a", "-n", "20000"}, 1},
		{"send-bw", []string{"-a", "-n", "20000"}, 1},
		{"write-bw", []string{"-D", "1", "-f", "0"}, 0},
		{"send-bw", []string{"-D", "1", "-f", "0"}, 0},
	} {
		t.Run(tc.cmd+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			args := append([]string{"-b"}, tc.args...)
			var cout, sout string
			var cerr, serr error
			var ended time.Duration
			if tc.rows == 0 {
				cout, sout, cerr, serr, ended = twoEndsFirstSent(t, tc.cmd, args)
			} else {
				cout, sout, cerr, serr, ended = twoEnds(t, tc.cmd, args, tc.rows, 100*time.Millisecond)
			}
			require.NoError(t, cerr, "client:\n%s", cout)
			require.NoError(t, serr, "server:\n%s", sout)
			require.Less(t, ended, promptly)
			if slices.Contains(tc.args, "-D") {
				// Each end runs for its own duration: the server goes on
				// to its end, owes no count and says nothing of the
				// client's stop.
				require.NotContains(t, sout, "stopped")
				for _, out := range []string{cout, sout} {
					require.True(t, strings.HasSuffix(out, report.ResultLine+"\n"), out)
				}
				return
			}
			iters := tc.args[slices.Index(tc.args, "-n")+1]
			require.Regexp(t, `\n Sent \d+ of `+iters+` messages of \d+ bytes: the peer stopped sending early \(interrupted\?\), so this end stopped too\n`, sout)
			require.Equal(t, 1, strings.Count(sout, "so this end stopped too"), "the sizes left are not run:\n%s", sout)
			require.NotContains(t, cout, " so this end stopped too", "the interrupted end stopped by itself")
			for _, out := range []string{cout, sout} {
				require.True(t, strings.HasSuffix(out, report.ResultLine+"\n"), out)
			}
			if tc.cmd == "send-bw" {
				require.Regexp(t, ` messages of \d+ bytes: the peer stopped sending before the rest arrived\n`, sout)
			}
		})
	}
}

// TestBidirNotStoppedEarly: ends of a -b run that both finish (-a, several
// QPs, sizes of several packets) neither stop early nor say so: the
// peer's requests took exactly their PSNs when its exchange message came.
func TestBidirNotStoppedEarly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd  string
		args []string
	}{
		{"send-bw", []string{"-q", "2", "-n", "200", "-s", "10000"}},
		{"write-bw", []string{"-a", "-n", "5"}},
		{"read-bw", []string{"-q", "3", "-n", "200", "-s", "10000"}},
		{"atomic-bw", []string{"-q", "2", "-n", "200"}},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			cout, sout, cerr, serr, _ := twoEnds(t, tc.cmd, append([]string{"-b"}, tc.args...), 1000, 0)
			require.NoError(t, cerr, "client:\n%s", cout)
			require.NoError(t, serr, "server:\n%s", sout)
			for _, out := range []string{cout, sout} {
				require.NotContains(t, out, "stopped")
				require.True(t, strings.HasSuffix(out, report.ResultLine+"\n"), out)
			}
		})
	}
}

// TestBidirInterruptedRDMACM: TestBidirInterrupted with -R, whose ends
// watch the rdma_cm exchange for the interrupted end's next message. With
// -a both ends end the run after the interrupted size, as over TCP: the
// decision rests on the reports, not on the exchange's transport.
func TestBidirInterruptedRDMACM(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		args []string
	}{
		{"send-bw", []string{"-n", "1000000", "-s", "64"}},
		{"write-bw", []string{"-n", "1000000", "-s", "64"}},
		// As in TestBidirInterrupted, enough iterations that the server
		// is still sending when the interrupted client's exchange message
		// comes, on a loaded host too.
		{"send-bw", []string{"-a", "-n", "20000"}},
	} {
		t.Run(tc.cmd+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			sout, cout, serr, cerr, ended := cmEndsInterrupted(t, tc.cmd, append([]string{"-b"}, tc.args...)...)
			require.NoError(t, cerr, "client:\n%s", cout)
			require.NoError(t, serr, "server:\n%s", sout)
			require.Less(t, ended, promptly)
			iters := tc.args[slices.Index(tc.args, "-n")+1]
			require.Regexp(t, `\n Sent \d+ of `+iters+` messages of \d+ bytes: the peer stopped sending early \(interrupted\?\), so this end stopped too\n`, sout)
			if slices.Contains(tc.args, "-a") {
				require.Len(t, bwRows(t, sout), 1, "the sizes after the interrupted one:\n%s", sout)
				require.Contains(t, sout, "no larger sizes are run")
			}
			for _, out := range []string{cout, sout} {
				require.True(t, strings.HasSuffix(out, report.ResultLine+"\n"), out)
			}
		})
	}
}

// keyCounter is an oob.Pipe that counts the key messages it sends once
// counting is on.
type keyCounter struct {
	oob.Pipe
	on   *atomic.Bool
	keys *atomic.Int32
}

func (p keyCounter) Send(b []byte) error {
	if p.on.Load() && len(b) == oob.KeyMsgSize {
		p.keys.Add(1)
	}
	return p.Pipe.Send(b)
}

// TestAllSizesInterrupted: an interrupt during a run of all sizes (-a)
// ends it after the size in progress, whatever the test: the interrupted
// client exchanges no sizes after it (at most three key messages: the
// size's closing handshake, one more when the interrupt came between
// sizes, and ctx_close_connection's), and both ends end promptly. A
// bandwidth run prints the rows of what it measured and succeeds on
// both ends, the send-bw server (and the other end of -b) noting that
// the client ended the run; a latency run fails on both ends, as an
// interrupted latency run of one size does. Without the stop the client
// went through the exchange of every size left (two key messages each)
// and the send-bw server waited 100 ms for each size's messages.
func TestAllSizesInterrupted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd  string
		args []string
	}{
		{"send-bw", []string{"-a", "-n", "1000"}},
		{"send-bw", []string{"-a", "-n", "1000", "-c", "UD"}},
		{"write-bw", []string{"-a", "-n", "1000"}},
		{"read-bw", []string{"-a", "-n", "1000"}},
		{"send-bw", []string{"-b", "-a", "-n", "1000"}},
		{"send-bw", []string{"-b", "-a", "-n", "1000", "-c", "UD"}},
		{"write-bw", []string{"-b", "-a", "-n", "1000"}},
		{"read-bw", []string{"-b", "-a", "-n", "1000"}},
		{"send-lat", []string{"-a", "-n", "1000"}},
		{"write-lat", []string{"-a", "-n", "1000"}},
		{"read-lat", []string{"-a", "-n", "1000"}},
	} {
		t.Run(tc.cmd+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			lat := strings.HasSuffix(tc.cmd, "-lat")
			var on atomic.Bool
			var keys atomic.Int32
			cout, sout, cerr, serr, ended := interruptedEnds(t, tc.cmd, tc.args, func(ctx context.Context, co *options, cbuf *syncbuf.Buffer, interrupt func()) {
				co.hooks.pipe = func(c net.Conn) oob.Pipe { return keyCounter{oob.NewTCPPipe(c), &on, &keys} }
				stop := func() {
					on.Store(true)
					interrupt()
				}
				if !lat {
					co.hooks.sent = func(n int) {
						if n > 0 {
							stop()
						}
					}
					return
				}
				go func() { // once the first row is out
					row := cFormatRE(fmtReportLat)
					for ctx.Err() == nil && !slices.ContainsFunc(strings.Split(cbuf.String(), "\n"), row.MatchString) {
						time.Sleep(10 * time.Millisecond)
					}
					stop()
				}()
			})
			require.Less(t, ended, promptly)
			require.LessOrEqual(t, keys.Load(), int32(3), "key messages the client sent after the interrupt:\n%s", cout)
			if lat {
				require.ErrorContains(t, cerr, "interrupted", cout)
				require.Error(t, serr, sout)
				return
			}
			require.NoError(t, cerr, "client:\n%s", cout)
			require.NoError(t, serr, "server:\n%s", sout)
			for _, out := range []string{cout, sout} {
				require.NotEmpty(t, bwRows(t, out), out)
				require.True(t, strings.HasSuffix(out, report.ResultLine+"\n"), out)
			}
			require.NotContains(t, cout, "no larger sizes", "the interrupted end stopped by itself")
			switch {
			case slices.Contains(tc.args, "-b"):
				require.Regexp(t, `\n The peer stopped early \(interrupted\?\) during the \d+-byte size: no larger sizes are run\n`, sout)
			case tc.cmd == "send-bw":
				require.Regexp(t, `\n The client ended the run before the \d+-byte size \(it was interrupted\): no larger sizes are run\n`, sout)
			}
		})
	}
}
