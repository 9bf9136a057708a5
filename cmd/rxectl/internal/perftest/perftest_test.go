package perftest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/oob"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/rxe"
	"github.com/stretchr/testify/require"
)

// clientLines is the client's output of a run of fewer than 3000
// iterations as perftest formats it, one format per line: the note that
// dynamic CQE polling is off, the header block, the address lines, the
// table.
func clientLines(pt Test, title string, rows int) []string {
	lines := []string{
		strings.TrimSuffix(dynPollNote, "\n"),
		report.ResultLine,
		"                    " + title,
		" Dual-port       : OFF\t\tDevice         : %s",
		" Number of qps   : %d\t\tTransport type : IB",
		" Connection type : RC\t\tUsing SRQ      : OFF",
		" PCIe relax order: ON\t\tLock-free      : OFF",
		" ibv_wr* API     : ON\t\tUsing Enhanced Reorder      : OFF",
		" TX depth        : %d",
	}
	if !pt.lat {
		lines = append(lines, " CQ Moderation   : %d", " CQE Poll Batch  : %d")
	}
	lines = append(lines, " Mtu             : %lu[B]", " Link type       : Ethernet", " GID index       : %d")
	if pt.verb == verbRead || pt.verb == verbAtomic {
		lines = append(lines, " Outstand reads  : %d")
	} else {
		lines = append(lines, " Max inline data : %d[B]")
	}
	lines = append(lines, " rdma_cm QPs\t : OFF", " Data ex. method : Ethernet", " Local drop mode : %s")
	if pt.lat {
		lines = append(lines, " CQ polling      : %s")
	}
	lines = append(lines, " Selective repeat: %s", report.ResultLine)
	addr := fmtBasicAddr
	if pt.verb == verbRead {
		addr += fmtReadAddr
	}
	if pt.verb == verbRead || pt.verb == verbWrite {
		addr += fmtRDMAAddr
	}
	lines = append(lines, addr, fmtGID, addr, fmtGID, report.ResultLine)
	row := fmtReport
	if pt.lat {
		lines = append(lines, strings.ReplaceAll(report.LatHeader, "%", "%%"))
		row = fmtReportLat
	} else {
		lines = append(lines, report.BWHeaderMiB)
	}
	for range rows {
		lines = append(lines, row)
	}
	return append(lines, report.ResultLine)
}

// checkLines matches output line by line against C formats and returns the
// fields of each line.
func checkLines(t *testing.T, out string, formats []string) [][]string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, len(formats), "output:\n%s", out)
	var got [][]string
	for i, f := range formats {
		got = append(got, fields(t, cFormatRE(f), lines[i]))
	}
	return got
}

// TestSubcommandTables runs every subcommand in loopback mode and checks
// each line of its output against perftest's formats, field by field.
func TestSubcommandTables(t *testing.T) {
	for _, pt := range Tests {
		t.Run(pt.cmd, func(t *testing.T) {
			t.Parallel()
			const iters = 20
			out, errs, code := runCmd(t, pt.cmd, "--loopback", "--udp-port", "0", "-n", strconv.Itoa(iters))
			require.Equal(t, cli.ExitOK, code, errs)
			title := pt.verb.title()
			if pt.verb == verbAtomic {
				title += " FETCH_AND_ADD"
			}
			if pt.lat {
				title += " Latency Test"
			} else {
				title += " BW Test"
			}
			formats := clientLines(pt, title, 1)
			got := checkLines(t, out, formats)
			byLine := func(prefix string) []string {
				for i, f := range formats {
					if strings.HasPrefix(f, prefix) {
						return got[i]
					}
				}
				return nil
			}
			require.Equal(t, []string{"rxe0"}, byLine(" Dual-port"))
			require.Equal(t, []string{"4096"}, byLine(" Mtu"))
			require.Equal(t, []string{"on, in use (the peer offers it too)"}, byLine(" Selective repeat"), "two rxectl ends negotiate selective repeat")
			require.Equal(t, []string{"1"}, byLine(" Number of qps"))
			wantTx := strconv.Itoa(min(defTxBW, iters)) // clipped to the iterations
			if pt.lat {
				wantTx = "1"
			}
			require.Equal(t, []string{wantTx}, byLine(" TX depth"))
			if !pt.lat {
				require.Equal(t, []string{"16"}, byLine(" CQE Poll Batch"), "CTX_POLL_BATCH below 3000 iterations")
			}
			if pt.verb == verbRead || pt.verb == verbAtomic {
				require.Equal(t, []string{"128"}, byLine(" Outstand reads"))
			}
			// Address lines: local is the client (127.0.0.2), remote the server.
			n := len(got)
			local, remote := got[n-8], got[n-6]
			require.Equal(t, "local", local[0])
			require.Equal(t, "remote", remote[0])
			require.Equal(t, "0000", local[1])
			require.Equal(t, []string{"GID", "00", "00", "00", "00", "00", "00", "00", "00", "00", "00", "255", "255", "127", "00", "00", "02"}, got[n-7])
			require.Equal(t, "01", got[n-5][16])
			if pt.verb == verbRead {
				require.Equal(t, "0x80", local[4])
			}
			row := got[len(got)-2]
			require.Equal(t, strconv.Itoa(defaultSize(pt)), row[0])
			require.Equal(t, strconv.Itoa(iters), row[1])
			nums := make([]float64, len(row))
			for i, f := range row {
				nums[i], _ = strconv.ParseFloat(f, 64)
			}
			if pt.lat {
				tMin, tMax, typ, avg, p99, p999 := nums[2], nums[3], nums[4], nums[5], nums[7], nums[8]
				require.Positive(t, tMin)
				require.LessOrEqual(t, tMin, typ)
				require.LessOrEqual(t, typ, tMax)
				require.LessOrEqual(t, tMin, avg)
				// 20 iterations: m = 17, ceil(0.99 m) = ceil(0.999 m) = 17 = m.
				require.Equal(t, tMax, p99)
				require.Equal(t, tMax, p999)
			} else {
				avg, rate := nums[3], nums[4]
				// The message rate (6 decimals) is positive; the average can
				// print as 0.00 MiB/s for 8-byte atomics on a loaded machine.
				require.Positive(t, rate)
				require.GreaterOrEqual(t, avg, 0.0)
				// The average is printed with 2 decimals: ±0.005 MiB/s.
				perMiB := float64(1<<20) / float64(defaultSize(pt)) / 1e6
				require.InDelta(t, avg*perMiB, rate, 0.005*perMiB+0.000001+rate*0.01)
			}
		})
	}
}

func defaultSize(pt Test) int {
	switch {
	case pt.verb == verbAtomic:
		return 8
	case pt.lat:
		return 2
	}
	return 65536
}

// startServer runs a server for args on an ephemeral TCP port and returns
// its port and a function that waits for it.
// tcpEnds runs cmd's server on 127.0.0.1 and its client on 127.0.0.2,
// both with args, the exchange over TCP, and returns both outputs once
// both succeeded.
func tcpEnds(t *testing.T, cmd string, args ...string) (cout, sout string) {
	t.Helper()
	// Not about retries: loadProof's ACK timeout on both ends.
	args = append([]string{"-u", testutil.QPTimeoutArg}, args...)
	port, wait := startServer(t, cmd, append([]string{"--bind", "127.0.0.1"}, args...)...)
	cout, errs, code := runCmd(t, append([]string{cmd, "127.0.0.1", "-p", strconv.Itoa(port), "--bind", "127.0.0.2"}, args...)...)
	sout, serr := wait()
	require.NoError(t, serr, "server; client: code %d, stderr: %s, stdout: %s", code, errs, cout)
	require.Equal(t, cli.ExitOK, code, errs)
	return cout, sout
}

// tcpEndsHooked is tcpEnds with hook applied to each end's parsed
// options (server, then client) before it runs; the client runs as
// Test.Run runs it, its stdout the returned cout.
func tcpEndsHooked(t *testing.T, cmd string, hook func(*options), args ...string) (cout, sout string) {
	t.Helper()
	args = append([]string{"-u", testutil.QPTimeoutArg}, args...)
	port, wait := startServerHooked(t, cmd, hook, append([]string{"--bind", "127.0.0.1"}, args...)...)
	pt := findTest(t, cmd)
	o, err := parsePerftest(pt, append([]string{"127.0.0.1", "-p", strconv.Itoa(port), "--bind", "127.0.0.2"}, args...))
	require.NoError(t, err)
	hook(o)
	var out, errb bytes.Buffer
	o.stderr = &errb
	o.capWarn = &capWarner{w: &errb}
	out.WriteString(o.parseNotes())
	cerr := runClient(testutil.Context(t), pt, o, &out)
	sout, serr := wait()
	require.NoError(t, serr, "server; client: %v, stderr: %s, stdout: %s", cerr, errb.String(), out.String())
	require.NoError(t, cerr, errb.String())
	return out.String(), sout
}

func startServer(t *testing.T, cmd string, args ...string) (int, func() (string, error)) {
	t.Helper()
	return startServerHooked(t, cmd, func(*options) {}, args...)
}

// startServerHooked is startServer with hook applied to the server's
// parsed options.
func startServerHooked(t *testing.T, cmd string, hook func(*options), args ...string) (int, func() (string, error)) {
	t.Helper()
	pt := findTest(t, cmd)
	o, err := parsePerftest(pt, args)
	require.NoError(t, err)
	hook(o)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var out bytes.Buffer
	done := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Bound())
	go func() { done <- runServer(ctx, pt, o, &out, ln) }()
	return ln.Addr().(*net.TCPAddr).Port, func() (string, error) {
		defer cancel()
		err := <-done
		return out.String(), err
	}
}

// TestClientServerTCP runs our client against our server as two ends
// talking over TCP, with RoCE between 127.0.0.2 and 127.0.0.1 on ephemeral
// UDP ports, and checks both ends' output.
func TestClientServerTCP(t *testing.T) {
	for _, cmd := range []string{"read-bw", "send-bw", "write-lat", "send-lat"} {
		t.Run(cmd, func(t *testing.T) {
			t.Parallel()
			pt := findTest(t, cmd)
			common := []string{"-n", "50", "--udp-port", "0", "-s", "4096"}
			srvArgs := append([]string{"--bind", "127.0.0.1"}, common...)
			if cmd == "send-lat" {
				srvArgs = common // default: the address the client reached (127.0.0.1)
			}
			port, wait := startServer(t, cmd, srvArgs...)
			out, errs, code := runCmd(t, append([]string{cmd, "127.0.0.1", "-p", strconv.Itoa(port), "--bind", "127.0.0.2"}, common...)...)
			sout, serr := wait()
			require.NoError(t, serr)
			require.Equal(t, cli.ExitOK, code, errs)
			require.Contains(t, out, " TX depth        : ")
			require.True(t, strings.HasPrefix(sout, "\n************************************\n* Waiting for client to connect... *\n************************************\n"+report.ResultLine+"\n"), sout)
			require.NotContains(t, sout, " TX depth")
			if pt.verb == verbSend && !pt.lat {
				require.Contains(t, sout, " RX depth        : 50\n")
			}
			// Both ends print the table; for read-bw the server prints the
			// client's report, so the rows are equal.
			rowFmt := cFormatRE(fmtReport)
			if pt.lat {
				rowFmt = cFormatRE(fmtReportLat)
			}
			row := func(s string) string {
				for _, l := range strings.Split(s, "\n") {
					if rowFmt.MatchString(l) {
						return l
					}
				}
				return ""
			}
			require.NotEmpty(t, row(out), out)
			require.NotEmpty(t, row(sout), sout)
			if cmd == "read-bw" {
				require.Equal(t, row(out), row(sout))
			}
			require.Contains(t, sout, " remote address: LID 0000 QPN ")
			require.Regexp(t, `(?m)^ GID: 00:00:00:00:00:00:00:00:00:00:255:255:127:00:00:02$`, sout)
		})
	}
}

// TestJSONAndAll: --json reports a write-bw -a client's row of every size
// with its test, role, MTU and unit, and a latency test's row in usec.
func TestJSONAndAll(t *testing.T) {
	t.Parallel()
	out, errs, code := runCmd(t, "write-bw", "--loopback", "--udp-port", "0", "-a", "-n", "5", "--json", "-m", "1024")
	require.Equal(t, cli.ExitOK, code, errs)
	var res struct {
		Test    string      `json:"test"`
		Role    string      `json:"role"`
		MTU     int         `json:"mtu"`
		Unit    string      `json:"unit"`
		Results []report.BW `json:"results"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, "RDMA_Write BW Test", res.Test)
	require.Equal(t, "client", res.Role)
	require.Equal(t, 1024, res.MTU)
	require.Equal(t, "MiB/s", res.Unit)
	require.Len(t, res.Results, 23)
	for i, r := range res.Results {
		require.Equal(t, uint64(2<<i), r.Size)
		require.Equal(t, uint64(5), r.Iters)
		require.Positive(t, r.Avg)
	}

	out, errs, code = runCmd(t, "send-lat", "--loopback", "--udp-port", "0", "-n", "10", "--json")
	require.Equal(t, cli.ExitOK, code, errs)
	var lat struct {
		Unit    string       `json:"unit"`
		Results []report.Lat `json:"results"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &lat))
	require.Equal(t, "usec", lat.Unit)
	require.Len(t, lat.Results, 1)
	require.Positive(t, lat.Results[0].Typical)
}

// TestOutputFigures: --output prints the one figure it names as
// printf("%lf\n"), and --report_gbits's row below 0.1 Gb/s takes six
// decimals.
func TestOutputFigures(t *testing.T) {
	one := regexp.MustCompile(`^\d+\.\d{6}\n$`) // printf("%lf\n")
	for _, args := range [][]string{
		{"read-bw", "--output", "bandwidth"},
		{"send-bw", "--output=message_rate", "--report_gbits"},
		{"write-lat", "--output=latency"},
	} {
		out, errs, code := runCmd(t, append(args, "--loopback", "--udp-port", "0", "-n", "20")...)
		require.Equal(t, cli.ExitOK, code, errs)
		require.Regexp(t, one, out, "%v", args)
	}
	out, errs, code := runCmd(t, "read-bw", "--loopback", "--udp-port", "0", "-n", "20", "-s", "8", "--report_gbits")
	require.Equal(t, cli.ExitOK, code, errs)
	require.Contains(t, out, "\n"+report.BWHeaderGb+"\n")
	lines := strings.Split(out, "\n")
	row := lines[len(lines)-3]
	if !cFormatRE(fmtReport).MatchString(row) {
		require.Regexp(t, cFormatRE(fmtReportExt), row) // Gb/s below 0.1: six decimals
	}
}

func TestDuration(t *testing.T) {
	out, errs, code := runCmd(t, "write-bw", "--loopback", "--udp-port", "0", "-D", "1", "-s", "4096")
	require.Equal(t, cli.ExitOK, code, errs)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	f := fields(t, cFormatRE(fmtReport), lines[len(lines)-2])
	require.Equal(t, "4096", f[0])
	require.NotEqual(t, "0", f[1])
	require.Equal(t, "0.00", f[2]) // no peak in duration mode
}

// TestDurationSendAndLat: -D for send-bw (one BW row, no peak) and for the
// latency tests (REPORT_FMT_LAT_DUR under its header), in loopback and
// with a separate server, both ends ending cleanly.
func TestDurationSendAndLat(t *testing.T) {
	durRow := regexp.MustCompile(`^ (\d+) +(\d+) +(\d+\.\d\d) +(\d+\.\d\d) *$`)
	for _, cmd := range []string{"send-bw", "read-lat", "atomic-lat", "send-lat", "write-lat"} {
		for _, tcp := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/tcp=%v", cmd, tcp), func(t *testing.T) {
				t.Parallel()
				pt := findTest(t, cmd)
				common := []string{"--udp-port", "0", "-D", "1", "-f", "0"}
				var out, sout string
				if tcp {
					out, sout = tcpEnds(t, cmd, common...)
				} else {
					var errs string
					var code int
					out, errs, code = runCmd(t, append([]string{cmd, "--loopback"}, common...)...)
					require.Equal(t, cli.ExitOK, code, errs)
				}
				for _, o := range []string{out, sout} {
					if o == "" || pt.lat && pt.verb != verbSend && pt.verb != verbWrite && o == sout {
						continue // read-lat and atomic-lat servers print no table
					}
					lines := strings.Split(strings.TrimSuffix(o, "\n"), "\n")
					require.Equal(t, report.ResultLine, lines[len(lines)-1], o)
					if !pt.lat {
						f := fields(t, cFormatRE(fmtReport), lines[len(lines)-2])
						require.NotEqual(t, "0", f[1], o)
						require.Equal(t, "0.00", f[2], o)
						continue
					}
					require.Equal(t, report.LatDurHeader, lines[len(lines)-3], o)
					m := durRow.FindStringSubmatch(lines[len(lines)-2])
					require.NotNil(t, m, o)
					require.NotEqual(t, "0", m[2], o)
				}
			})
		}
	}
}

func TestLatDurRow(t *testing.T) {
	require.Equal(t, " 2             17632            28.36          17632.00\n", report.LatDurRow(report.Lat{Size: 2, Iters: 17632, Avg: 28.36, TPS: 17632}))
}

func TestPerftestUsage(t *testing.T) {
	requireUsageErrors(t, []usageCase{
		{[]string{"read-bw", "--loopback", "-n", "2"}, "iterations 2 not in [5, 2^28]"},
		{[]string{"read-bw", "--loopback", "-n", "99999999999999"}, "iterations 99999999999999 not in [5, 2^28]"},
		{[]string{"read-lat", "--loopback", "-n", "99999999999999"}, "not in [5, 2^28]"},
		{[]string{"read-bw", "--loopback", "-D", "-1"}, "-D -1: a duration is a positive number of seconds"},
		{[]string{"read-bw", "--loopback", "host"}, "--loopback takes no HOST"},
		{[]string{"read-bw", "a", "b"}, "at most one HOST"},
		{[]string{"read-bw", "--loopback", "-s", "0"}, "size 0"},
		{[]string{"read-bw", "--bogus"}, "not defined"},
		{[]string{"read-bw", "--loopback", "--output", "nope"}, "--output"},
		{[]string{"read-bw", "--output", "latency"}, "latency tests"},
		{[]string{"read-lat", "--output", "bandwidth"}, "bandwidth tests"},
		{[]string{"atomic-bw", "-s", "16"}, "8 bytes"},
		{[]string{"atomic-lat", "-A", "SWAP"}, "FETCH_AND_ADD or CMP_AND_SWAP"},
		{[]string{"read-lat", "-q", "2"}, "one QP"},
		{[]string{"read-bw", "--bind", "0.0.0.0"}, "--bind"},
		{[]string{"read-bw", "-D", "4", "-f", "2"}, "twice the margin"},
		{[]string{"read-bw", "-D", "4", "-a"}, "cannot be combined"},
		{[]string{"send-bw", "-I", "401"}, "max inline data is 400"},
		{[]string{"write-bw", "-c", "UD"}, "UD has no write-bw"},
		{[]string{"send-lat", "--connection=XRC"}, "rxectl supports RC, UC and UD so far"},
		{[]string{"read-bw", "-c", "FOO"}, "RC, UC, UD, XRC, DC or SRD"},
		{[]string{"read-bw", "-d", "mlx5_0"}, "no such device (rxectl has one device, rxe0)"},
		{[]string{"read-bw", "-i", "2"}, "port 1 only"},
		{[]string{"read-bw", "-x", "3"}, "one GID, at index 0"},
		{[]string{"read-bw", "--ipv6", "--bind", "127.0.0.1"}, "give an IPv6 address"},
		{[]string{"read-bw", "--bind", "::1"}, "add --ipv6"},
		{[]string{"send-lat", "--run_infinitely"}, "--run_infinitely is for bandwidth tests"},
		{[]string{"write-lat", "-D", "2", "-s", "1"}, "-s 2 or more"},
		{[]string{"write-bw", "-b", "--run_infinitely"}, "-b with --run_infinitely is not implemented: give -D"},
		{[]string{"write-bw", "--loopback", "-D", "0"}, "-D 0: a duration is a positive number of seconds"},
		{[]string{"send-bw", "--run_infinitely", "--duration=0"}, "-D 0: a duration is a positive number of seconds"},
		{[]string{"read-bw", "-D", "4", "-f", "-2"}, "-f -2: a margin is a number of seconds, 0 or more"},
		{[]string{"send-lat", "-N"}, "-N: latency tests measure no peak bandwidth"},
		{[]string{"read-bw", "127.0.0.1", "--port=0"}, "port 0 not in [1, 65535]"},
		{[]string{"write-bw", "--loopback", "--bind", "127.0.0.5"}, "--bind 127.0.0.5: --loopback binds its own addresses"},
		{[]string{"send-lat", "--loopback", "-R", "--bind=127.0.0.5"}, "--bind 127.0.0.5: --loopback binds its own addresses"},
		{[]string{"read-lat", "--noPeak", "-n", "10"}, "-N: latency tests measure no peak bandwidth"},
	})
	out, _, code := runCmd(t, "help", "atomic-lat")
	require.Equal(t, cli.ExitOK, code)
	require.Contains(t, out, "-atomic_type")
	require.Contains(t, out, "ib_atomic_lat")
}

// usageCase is a command line that must fail as a usage error with want
// in its message.
type usageCase struct {
	args []string
	want string
}

// requireUsageErrors runs each case and checks its exit status and
// message. A case whose command line is taken after all would start a
// test, a server waiting for its client: its run is interrupted after
// 5 s, and it fails on its exit status instead of hanging the package.
func requireUsageErrors(t *testing.T, cases []usageCase) {
	t.Helper()
	for _, tc := range cases {
		var out, errb bytes.Buffer
		code := findTest(t, tc.args[0]).Run(tc.args[1:], &out, &errb, func() context.Context {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			t.Cleanup(cancel)
			return ctx
		})
		require.Equal(t, cli.ExitUsage, code, "%v: %s", tc.args, errb.String())
		require.Contains(t, errb.String(), tc.want, "%v", tc.args)
	}
}

// TestConnectionRefused: no server on the port.
func TestConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	_, errs, code := runCmd(t, "read-bw", "127.0.0.1", "-p", port)
	require.Equal(t, cli.ExitFail, code)
	require.Contains(t, errs, "connect to 127.0.0.1:"+port+": connection refused — is a server running?")
}

// TestMTUMismatch: both ends ask for different MTUs with -m.
func TestMTUMismatch(t *testing.T) {
	port, wait := startServer(t, "read-bw", "-m", "1024", "--udp-port", "0", "--bind", "127.0.0.1", "-n", "20")
	out, errs, code := runCmd(t, "read-bw", "127.0.0.1", "-p", strconv.Itoa(port), "-m", "2048", "--udp-port", "0",
		"--bind", "127.0.0.2", "-n", "20", "--json")
	require.Equal(t, cli.ExitOK, code, errs)
	require.Contains(t, errs, "the peer's MTU is 1024 (its -m or port MTU), below -m 2048: using 1024")
	var r struct{ MTU int }
	require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	require.Equal(t, 1024, r.MTU, "the smaller of both sides' MTUs, as perftest's check_mtu")
	sout, serr := wait()
	require.NoError(t, serr)
	require.Contains(t, sout, "Mtu             : 1024[B]")
}

// TestMTUFlag: -m as perftest's set_mtu takes it. A -m above the port's
// active MTU runs at the active MTU, and so does one that is not a path
// MTU, each with a note.
func TestMTUFlag(t *testing.T) {
	for _, tc := range []struct {
		name    string
		link    int // the devices' link MTU; 0: the interface's
		mtu     string
		want    int
		note    string
		noNotes bool
	}{
		{name: "a path MTU", mtu: "2048", want: 2048, noNotes: true},
		{name: "not a path MTU", mtu: "1000", want: 4096, note: "-m 1000 is not a path MTU (256, 512, 1024, 2048 or 4096): using the port's active MTU 4096"},
		{name: "negative", mtu: "-5", want: 4096, note: "-m -5 is not a path MTU"},
		{name: "above the active MTU", link: 1500, mtu: "4096", want: 1024,
			note: "-m 4096 is above this port's active MTU 1024 (link MTU 1500 minus RoCE headers): using 1024"},
		{name: "the active MTU of a 1500-byte link", link: 1500, mtu: "1024", want: 1024, noNotes: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := linkMTU
			linkMTU = tc.link
			t.Cleanup(func() { linkMTU = old })
			out, errs, code := runCmd(t, "write-bw", "--loopback", "--udp-port", "0", "-n", "20", "-s", "8192", "-m", tc.mtu, "--json")
			require.Equal(t, cli.ExitOK, code, errs)
			var r struct{ MTU int }
			require.NoError(t, json.Unmarshal([]byte(out), &r), out)
			require.Equal(t, tc.want, r.MTU)
			if tc.noNotes {
				require.NotContains(t, errs, "MTU")
			} else {
				require.Contains(t, errs, tc.note)
			}
		})
	}
}

// fakePerftest is a minimal perftest server for error paths: it answers
// the exchange with the version it is given and a key message naming
// gid, then waits for the client to go away.
func fakePerftest(t *testing.T, version []byte, gid [16]byte) int {
	t.Helper()
	key := oob.KeyMsg{OutReads: 128, QPN: 0x11, PSN: 0x123456, RKey: 0x1234, VAddr: 0x7f0000001000, GID: gid}
	return fakePeer(t, version, key, -1)
}

// fakePeer is a TCP peer that answers the setup exchanges (version, page
// size, cache line, MTU 1024), then answers each key message with key,
// keys of them (all of them when keys < 0), and then says nothing while
// keeping the connection open for up to 30 s (a peer stopped with
// SIGSTOP, a host gone with TCP still up). It returns the port it listens
// on.
func fakePeer(t *testing.T, version []byte, key oob.KeyMsg, keys int) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	quiet := make(chan struct{})
	t.Cleanup(func() {
		close(quiet)
		ln.Close()
	})
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		xchg := func(n int, reply []byte) bool {
			b := make([]byte, n)
			if _, err := io.ReadFull(c, b); err != nil {
				return false
			}
			_, err := c.Write(reply)
			return err == nil
		}
		if !xchg(16, version) || !xchg(4, oob.Int32Msg(4096)) || !xchg(4, oob.Int32Msg(64)) || !xchg(2, oob.MTUMsg(3)) {
			return
		}
		for i := 0; keys < 0 || i < keys; i++ {
			if !xchg(oob.KeyMsgSize, key.Marshal()) {
				return
			}
		}
		select {
		case <-quiet:
		case <-time.After(30 * time.Second):
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestPeerPerftestNeeds4791(t *testing.T) {
	v := make([]byte, 16)
	copy(v, "6.06")
	port := fakePerftest(t, v, [16]byte{10: 0xff, 11: 0xff, 12: 127, 15: 1})
	_, errs, code := runCmd(t, "read-bw", "127.0.0.1", "-p", strconv.Itoa(port), "--udp-port", "0")
	require.Equal(t, cli.ExitFail, code)
	require.Contains(t, errs, "the peer is perftest 6.06, which sends RoCE to UDP port 4791 only")
}

func TestPeerTooOld(t *testing.T) {
	v := make([]byte, 16)
	copy(v, "5.60")
	port := fakePerftest(t, v, [16]byte{})
	_, errs, code := runCmd(t, "read-bw", "127.0.0.1", "-p", strconv.Itoa(port), "--udp-port", "0")
	require.Equal(t, cli.ExitFail, code)
	require.Contains(t, errs, "older than 5.70")
}

// TestRetryExceeded: the peer's RoCE address answers nothing; the client
// reports the retry error with its likely causes.
func TestRetryExceeded(t *testing.T) {
	u, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	deadPort := u.LocalAddr().(*net.UDPAddr).Port
	u.Close()
	port := fakePerftest(t, oob.VersionMsg(uint16(deadPort)), [16]byte{10: 0xff, 11: 0xff, 12: 127, 15: 1})
	_, errs, code := runCmd(t, "read-bw", "127.0.0.1", "-p", strconv.Itoa(port), "--udp-port", "0", "--bind", "127.0.0.2", "-n", "5", "-u", "6")
	require.Equal(t, cli.ExitFail, code)
	require.Contains(t, errs, "RETRY_EXC_ERR")
	require.Contains(t, errs, "transport retry counter exceeded")
	require.Contains(t, errs, "wrong address or GID")
	require.NotRegexp(t, `: peer\s*$`, errs, "no stray sentinel text at the end")
}

// TestRetryExcText: RETRY_EXC_ERR names its likely causes by what the
// peer did: answered during the retries (loss), answered before them and
// then fell silent (the peer or the path gone), or never answered (the
// address, the MTU, a firewall).
func TestRetryExcText(t *testing.T) {
	peer := netip.MustParseAddrPort("192.0.2.7:4791")
	for _, tc := range []struct {
		answered bool
		n, rcvd  uint64
		want     []string
		not      []string
	}{
		{true, 12, 5000, []string{"kept answering (12 responses during the retries)", "packet loss"}, []string{"firewall", "is gone"}},
		{false, 0, 5000, []string{"answered 5000 packets earlier in the run", "is gone, or the path between the hosts broke"},
			[]string{"firewall", "wrong address"}},
		{false, 0, 0, []string{"never answered during the retries", "wrong address or GID", "UDP port 4791 blocked by a firewall"}, nil},
	} {
		got := retryExcText(peer, tc.answered, tc.n, tc.rcvd, 14, defRetryCount)
		for _, w := range tc.want {
			require.Contains(t, got, w)
		}
		for _, w := range tc.not {
			require.NotContains(t, got, w)
		}
	}
	err := peerQPError{msg: "completion with status RETRY_EXC_ERR: x"}
	require.ErrorIs(t, fmt.Errorf("wrapped: %w", err), errPeerQP)
	require.Equal(t, "completion with status RETRY_EXC_ERR: x", err.Error())
}

// TestEventsInlineCompat runs with CQ events (-e), inline data (-I) and
// perftest's device flags given with the only values a gorxe device has.
func TestEventsInlineCompat(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		inline string // the header's "Max inline data" ("": an Outstand reads line)
	}{
		{[]string{"read-bw", "-e", "-F", "-d", "rxe0", "-i", "1", "-x", "0", "-c", "RC"}, ""},
		{[]string{"send-bw", "-e", "-s", "64", "-I", "64"}, "64"},
		{[]string{"write-bw", "-s", "100", "--inline_size=400"}, "400"},
		{[]string{"send-lat", "-e", "-I", "16", "-s", "16"}, "16"},
		{[]string{"write-lat", "-I", "2"}, "2"},
		{[]string{"atomic-lat", "--events"}, ""},
		{[]string{"send-bw", "-I", "32", "-s", "64"}, "32"}, // larger than -I: not inline
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			out, errs, code := runCmd(t, append(tc.args, "--loopback", "--udp-port", "0", "-n", "20")...)
			require.Equal(t, cli.ExitOK, code, errs)
			if tc.inline != "" {
				require.Contains(t, out, "\n Max inline data : "+tc.inline+"[B]\n")
			} else {
				require.Contains(t, out, "\n Outstand reads  : ")
			}
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			row := fmtReport
			if strings.Contains(tc.args[0], "lat") {
				row = fmtReportLat
			}
			f := fields(t, cFormatRE(row), lines[len(lines)-2])
			require.Equal(t, "20", f[1])
		})
	}
}

// TestIPv6: RoCE over IPv6, in loopback (both devices on ::1, different
// UDP ports) and as two ends reaching each other over [::1].
func TestIPv6(t *testing.T) {
	u, err := net.ListenPacket("udp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback address: %v", err)
	}
	u.Close()
	gid := `(?m)^ GID: 00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:01$`
	out, errs, code := runCmd(t, "write-bw", "--loopback", "--ipv6", "-n", "20", "-s", "4096")
	require.Equal(t, cli.ExitOK, code, errs)
	require.Regexp(t, gid, out)

	ln, err := net.Listen("tcp", "[::1]:0")
	require.NoError(t, err)
	o, err := parsePerftest(findTest(t, "send-lat"), []string{"--ipv6", "--udp-port", "0", "-n", "20"})
	require.NoError(t, err)
	var sout bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- runServer(context.Background(), findTest(t, "send-lat"), o, &sout, ln) }()
	out, errs, code = runCmd(t, "send-lat", "::1", "-p", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), "--ipv6", "--udp-port", "0", "-n", "20")
	require.NoError(t, <-done)
	require.Equal(t, cli.ExitOK, code, errs)
	require.Regexp(t, gid, out)
	require.Regexp(t, gid, sout.String())

	// Without --ipv6 an IPv6 exchange is refused, with a hint.
	_, errs, code = runCmd(t, "read-bw", "--loopback", "--bind", "::1")
	require.Equal(t, cli.ExitUsage, code)
	require.Contains(t, errs, "add --ipv6")
}

// TestReadRetryFlag: --local-drop-mode (or its other name --read-retry) takes adaptive, timeout or spin (default
// adaptive) and refuses anything else.
func TestReadRetryFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want rxe.LocalDropMode
	}{
		{nil, rxe.LocalDropAdaptive},
		{[]string{"--local-drop-mode=adaptive"}, rxe.LocalDropAdaptive},
		{[]string{"--read-retry=spin"}, rxe.LocalDropSpin}, // the other name
		{[]string{"--read-retry", "timeout"}, rxe.LocalDropTimeout},
		{[]string{"--read-retry=spin"}, rxe.LocalDropSpin},
	} {
		o, err := parsePerftest(findTest(t, "read-bw"), tc.args)
		require.NoError(t, err, tc.args)
		require.Equal(t, tc.want, o.localDropMode, tc.args)
	}
	for _, bad := range []string{"", "Adaptive", "udelay", "1"} {
		_, err := parsePerftest(findTest(t, "read-bw"), []string{"--local-drop-mode=" + bad})
		require.ErrorContains(t, err, "adaptive, timeout or spin", bad)
	}
	_, errs, code := runCmd(t, "write-bw", "--loopback", "--read-retry=busy")
	require.Equal(t, cli.ExitUsage, code)
	require.Contains(t, errs, `invalid value "busy" for flag -read-retry`)
}

// TestReadRetryModes: a loopback READ test whose client device refuses 5%
// of its sends completes in every --local-drop-mode. Adaptive and spin
// send the refused datagrams again themselves (no retransmission); timeout
// discards them and the requester retransmits.
func TestReadRetryModes(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"adaptive", "timeout", "spin"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			const iters = 200
			args := []string{"read-bw", "-n", strconv.Itoa(iters), "-s", "4096",
				"--local-drop=5%", "--local-drop-mode=" + mode}
			if mode != "timeout" {
				// A 4.3 s ACK timeout (-u 20) and no recovery timer: on a
				// machine loaded by other tests a 67 ms timeout or a 2 ms
				// tail probe can fire while responses are queued, and this
				// run must show that nothing needed retransmitting.
				args = append(args, "-u", "20", "--recovery=off")
			}
			r := runJSON(t, args...)
			require.Equal(t, mode, r.LocalDropMode)
			require.Len(t, r.Results, 1)
			require.Equal(t, uint64(iters), r.Results[0].Iters)
			require.Positive(t, r.Faults.Send.LocalDrops)
			require.Equal(t, r.Faults.Send.LocalDrops, r.Device.LocalDrops, "the device counts every refused send")
			if mode == "timeout" {
				require.Positive(t, r.Transport.Retransmits, "the requester recovers the discarded READs")
			} else {
				require.Zero(t, r.Transport.Retransmits, "the device sent the refused datagrams again")
				require.Zero(t, r.Transport.Timeouts)
			}
		})
	}
}

// bidirRow finds the BW row of out and checks it: this end's size and
// iterations, and an average that matches the message rate (both are sums
// of the two directions).
func bidirRow(t *testing.T, out string, size, iters int) string {
	t.Helper()
	re := cFormatRE(fmtReport)
	for _, l := range strings.Split(out, "\n") {
		if !re.MatchString(l) {
			continue
		}
		f := strings.Fields(l)
		require.Len(t, f, 5, l)
		require.Equal(t, strconv.Itoa(size), f[0], l)
		require.Equal(t, strconv.Itoa(iters), f[1], l)
		peak, err1 := strconv.ParseFloat(f[2], 64)
		avg, err2 := strconv.ParseFloat(f[3], 64)
		rate, err3 := strconv.ParseFloat(f[4], 64)
		require.NoError(t, errors.Join(err1, err2, err3))
		// The message rate (6 decimals) is positive; MiB/s may print 0.00
		// for 8-byte atomics on a loaded machine.
		require.Positive(t, rate, l)
		require.GreaterOrEqual(t, avg, 0.0, l)
		// The printed figures are rounded to 0.01 (BW) and 1e-6 (MsgRate):
		// allow that on top of 2%, or small sizes fail on rounding alone.
		require.GreaterOrEqual(t, peak, avg*0.99-0.01, l)
		want := rate * 1e6 * float64(size) / 0x100000
		require.InDelta(t, want, avg, 0.02*want+0.006+0.5e-6*float64(size)/0x100000*1e6, l)
		return l
	}
	t.Fatalf("no BW row in:\n%s", out)
	return ""
}

// TestBidirectionalLoopback runs the BW tests with -b in one process.
func TestBidirectionalLoopback(t *testing.T) {
	for _, cmd := range []string{"write-bw", "read-bw", "atomic-bw", "send-bw"} {
		t.Run(cmd, func(t *testing.T) {
			t.Parallel()
			pt := findTest(t, cmd)
			size := 4096
			args := []string{cmd, "--loopback", "-b", "--udp-port", "0", "-n", "200"}
			if pt.verb == verbAtomic {
				size = 8
			} else {
				args = append(args, "-s", "4096")
			}
			out, errs, code := runCmd(t, args...)
			require.Equal(t, cli.ExitOK, code, errs)
			title := pt.verb.title()
			if pt.verb == verbAtomic {
				title += " FETCH_AND_ADD"
			}
			require.Contains(t, out, "\n                    "+title+" Bidirectional BW Test\n")
			require.Contains(t, out, " TX depth        : ")
			bidirRow(t, out, size, 200)
		})
	}
}

// TestBidirectionalTCP runs -b client and server over TCP: both ends
// print the header with TX depth and the same summed row.
func TestBidirectionalTCP(t *testing.T) {
	for _, cmd := range []string{"write-bw", "send-bw"} {
		t.Run(cmd, func(t *testing.T) {
			t.Parallel()
			out, sout := tcpEnds(t, cmd, "-b", "-n", "100", "--udp-port", "0", "-s", "8192")
			for _, o := range []string{out, sout} {
				require.Contains(t, o, " Bidirectional BW Test\n")
				require.Contains(t, o, " TX depth        : 100\n")
			}
			require.Equal(t, bidirRow(t, out, 8192, 100), bidirRow(t, sout, 8192, 100))
		})
	}
}

// TestBidirectionalDuration runs the BW tests with -b and -D between a
// server and a client over TCP: each end runs its requests for the
// duration, and prints its own iteration count and no peak (duration
// mode). READ, WRITE and atomics exchange reports as with -n, so both ends
// print the same sum of both directions, next to the requests each end
// counted in its own window. Their loops run on clocks of the test's (stepClock), so
// each window counts some completions however slow the host is (on a
// loaded one a real second can pass before the first 64 KiB WRITE
// completes, and perftest then counts none). send-bw exchanges none
// (perftest's send_bw -b -D): each end counts what it sent and what it
// received, so the two rows count the same messages and agree within the
// edges of their windows; its ends keep the host's clock, as the
// receiving half times its window on it.
func TestBidirectionalDuration(t *testing.T) {
	for _, cmd := range []string{"write-bw", "read-bw", "atomic-bw", "send-bw"} {
		t.Run(cmd, func(t *testing.T) {
			t.Parallel()
			args := []string{"-b", "-D", "1", "-f", "0", "--udp-port", "0"}
			var out, sout string
			var clks []*steppedClock // the server's, the client's (tcpEndsHooked's order)
			var cqMod uint64
			if cmd == "send-bw" {
				out, sout = tcpEnds(t, cmd, args...)
			} else {
				out, sout = tcpEndsHooked(t, cmd, func(o *options) {
					clks = append(clks, stepClock(o, 200*time.Millisecond)) // 4 waits in the window
					cqMod = uint64(o.cqMod)
				}, args...)
			}
			var rows [2][]string
			for i, o := range []string{out, sout} {
				require.Contains(t, o, " Bidirectional BW Test\n")
				for _, l := range strings.Split(o, "\n") {
					if cFormatRE(fmtReport).MatchString(l) {
						rows[i] = strings.Fields(l)
					}
				}
				require.Len(t, rows[i], 5, o)
				iters, err := strconv.Atoi(rows[i][1])
				require.NoError(t, err)
				require.Positive(t, iters, o)
				require.Equal(t, "0.00", rows[i][2], "no peak in duration mode")
			}
			require.Equal(t, rows[0][0], rows[1][0], "size")
			if cmd != "send-bw" {
				require.Equal(t, rows[0][3:], rows[1][3:], "both ends print the sum of both directions")
				require.Len(t, clks, 2)
				for _, c := range clks {
					require.Positive(t, c.counted, "completions in each end's window")
				}
				own := func(c *steppedClock) string { return strconv.FormatUint(c.counted*cqMod, 10) }
				require.Equal(t, []string{own(clks[1]), own(clks[0])}, []string{rows[0][1], rows[1][1]},
					"each end's #iterations: cq-mod requests a completion in its window")
				return
			}
			var rates [2]float64
			for i := range rows {
				var err error
				rates[i], err = strconv.ParseFloat(rows[i][4], 64)
				require.NoError(t, err)
				require.Positive(t, rates[i])
			}
			require.InEpsilon(t, rates[0], rates[1], 0.25, "both rows count both directions: %v", rows)
		})
	}
}

// TestBracketedIPv6Host: HOST may be an IPv6 address in brackets, as in a
// URL; the client dials it (here nothing listens) instead of failing on
// doubled brackets.
func TestBracketedIPv6Host(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	require.NoError(t, ln.Close())
	_, errs, code := runCmd(t, "write-bw", "-p", port, "-n", "5", "[::1]")
	require.Equal(t, cli.ExitFail, code)
	require.Contains(t, errs, "connect to [::1]:"+port+":")
	require.NotContains(t, errs, "[[")
	// The bare address reaches every use of HOST, -R's too.
	o, err := parsePerftest(Tests[0], []string{"-R", "[::1]"})
	require.NoError(t, err)
	require.Equal(t, "::1", o.host)
}

// TestSilentPeer: a TCP peer that connects (or accepts) and says nothing
// ends the first exchange after the setup deadline with a clear error, on
// either side, instead of holding this end forever.
func TestSilentPeer(t *testing.T) {
	var tst Test
	for _, pt := range Tests {
		if pt.cmd == "write-bw" {
			tst = pt
		}
	}
	o, err := parsePerftest(tst, []string{"-n", "5", "--udp-port", "0", "--bind", "127.0.0.1"})
	require.NoError(t, err)
	o.hooks.setupTimeout = 200 * time.Millisecond

	// The client against a listener that accepts and never writes.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	quiet := make(chan struct{})
	defer close(quiet)
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			<-quiet
		}
	}()
	o.host, o.oobPort = "127.0.0.1", ln.Addr().(*net.TCPAddr).Port
	start := time.Now()
	err = runClient(context.Background(), tst, o, io.Discard)
	require.ErrorContains(t, err, "exchanging versions: the peer sent nothing in time")
	require.Less(t, time.Since(start), 4*time.Second)

	// The server against a client that connects and never writes.
	so, err := parsePerftest(tst, []string{"-n", "5", "--udp-port", "0", "--bind", "127.0.0.1"})
	require.NoError(t, err)
	so.hooks.setupTimeout = 200 * time.Millisecond
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c, err := net.Dial("tcp", sl.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	start = time.Now()
	err = runServer(context.Background(), tst, so, io.Discard, sl)
	require.ErrorContains(t, err, "exchanging versions: the peer sent nothing in time")
	require.Less(t, time.Since(start), 4*time.Second)
}

// TestEndLoopbackError: the error of a loopback run is the client's,
// unless the client failed only because the server closed the exchange:
// then the server's error, the cause, is reported.
func TestEndLoopbackError(t *testing.T) {
	closed := fmt.Errorf("closing the connection: %w", oob.ErrPeerClosed)
	srv := errors.New("received 19990 of 20000 messages, then nothing for 1m0s: the client stopped sending")
	cli := errors.New("completion with status RETRY_EXC_ERR")
	for _, tc := range []struct {
		name       string
		cerr, serr error
		want       string
	}{
		{"both fine", nil, nil, ""},
		{"client failed", cli, nil, cli.Error()},
		{"client failed first", cli, fmt.Errorf("waiting: %w", oob.ErrPeerClosed), cli.Error()},
		{"server failed", nil, srv, "server: " + srv.Error()},
		{"server failed, client saw it close", closed, srv, "server: " + srv.Error()},
		{"client saw the server close", closed, nil, closed.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := endLoopback(io.Discard, nil, nil, tc.cerr, tc.serr)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tc.want)
		})
	}
}

// TestSizeSuffix: -s takes perftest's K and M suffixes (-s 64K, -s 1M),
// besides bytes in decimal or 0x hex.
func TestSizeSuffix(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want int
		err  string
	}{
		{"-s=65536", 65536, ""},
		{"-s=64K", 65536, ""},
		{"--size=1M", 1 << 20, ""},
		{"-s=2047M", 2047 << 20, ""},
		{"-s=2048M", 0, "size 2147483648 not in [1, 2147483647]"}, // perftest: size > UINT_MAX/2
		{"-s=0x1000", 4096, ""},
		{"-s=4096M", 0, "size 4294967296 not in [1, 2147483647]"},
		{"-s=64k", 0, `invalid value "64k" for flag -s: want a number of bytes, or of KiB or MiB with a K or M suffix`},
		{"-s=1G", 0, `invalid value "1G" for flag -s`},
		{"-s=9223372036854775807K", 0, "out of range"},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			o, err := parsePerftest(findTest(t, "write-bw"), []string{tc.arg})
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, o.size)
		})
	}
	o, err := parsePerftest(findTest(t, "write-lat"), nil)
	require.NoError(t, err)
	require.Equal(t, defSizeLat, o.size)
	o, err = parsePerftest(findTest(t, "atomic-bw"), nil)
	require.NoError(t, err)
	require.Equal(t, defSizeAtomic, o.size)
}

// TestCheckWCExplains: the completion errors a mismatch of the two ends
// causes carry an explanation; a receive too small for the peer's
// message (the ends' -s differ) is one of them.
func TestCheckWCExplains(t *testing.T) {
	s := &session{o: &options{}}
	require.NoError(t, s.checkWC(rxe.WC{Status: rxe.WCSuccess}))
	for _, tc := range []struct {
		status rxe.WCStatus
		want   string
	}{
		{rxe.WCLocLenErr, "LOC_LEN_ERR (vendor_err 0x0) on QP 0x11: a message arrived longer than this end's receive buffer: the other end sends larger messages"},
		{rxe.WCRemInvReqErr, "REM_INV_REQ_ERR (vendor_err 0x0) on QP 0x11: the peer's QP rejected the request as invalid"},
		{rxe.WCRNRRetryExcErr, "RNR_RETRY_EXC_ERR (vendor_err 0x0) on QP 0x11: receiver-not-ready retries exceeded"},
	} {
		err := s.checkWC(rxe.WC{Status: tc.status, QPNum: 0x11})
		require.ErrorContains(t, err, tc.want)
		require.ErrorIs(t, err, errPeerQP)
	}
}

// TestInlineRefusedByReadAtomic: read and atomic tests refuse -I, 0
// included, as perftest's parser refuses it for READ and atomic verbs
// ("Inline feature not available on READ/Atomic verbs"); without -I their
// inline size is 0 (their header shows the outstanding reads instead).
func TestInlineRefusedByReadAtomic(t *testing.T) {
	requireUsageErrors(t, []usageCase{
		{[]string{"read-bw", "-I", "16"}, "-I: inline data is for the SEND and WRITE tests; read-bw posts none"},
		{[]string{"read-lat", "-I", "0"}, "Inline feature not available on READ/Atomic verbs"},
		{[]string{"atomic-bw", "--inline_size=8"}, "atomic-bw posts none"},
		{[]string{"atomic-lat", "--inline_size=0"}, "Inline feature not available on READ/Atomic verbs"},
	})
	for _, cmd := range []string{"read-bw", "atomic-lat"} {
		o, err := parsePerftest(findTest(t, cmd), nil)
		require.NoError(t, err)
		require.Zero(t, o.inline, cmd)
	}
}

// TestOutsRefusedByWriteSend: -o, the outstanding READs and atomics, is
// refused by the tests that post neither, as perftest's parser refuses it
// ("Setting Outstanding reads only available on READ verb"), rather than
// being ignored; the read and atomic tests take it.
func TestOutsRefusedByWriteSend(t *testing.T) {
	requireUsageErrors(t, []usageCase{
		{[]string{"write-bw", "-o", "4"}, "-o: outstanding reads are for the read and atomic tests; write-bw posts none"},
		{[]string{"send-lat", "--outs=1"}, "Setting Outstanding reads only available on READ verb"},
	})
	for _, args := range [][]string{{"read-bw", "-o", "4"}, {"atomic-lat", "--outs=2"}, {"read-lat", "-o", "0"}} {
		_, err := parsePerftest(findTest(t, args[0]), args[1:])
		require.NoError(t, err, "%v", args)
	}
}
