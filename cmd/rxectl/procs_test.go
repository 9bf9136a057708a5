package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/syncbuf"
	"github.com/gorxe/gorxe/internal/testutil"
)

// TestMain runs this test binary as rxectl itself when RXECTL_TEST_MAIN is
// set, so that a test can start rxectl processes.
func TestMain(m *testing.M) {
	if os.Getenv("RXECTL_TEST_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

// TestTwoProcessesShareCPUs: a server and a client as two rxectl
// processes on this host each run the test on half the processors and
// say so in the header.
func TestTwoProcessesShareCPUs(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: nothing to share")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := func(args ...string) (*exec.Cmd, *syncbuf.Buffer) {
		cmd := exec.CommandContext(ctx, exe, args...)
		env := []string{"RXECTL_TEST_MAIN=1"}
		for _, e := range os.Environ() {
			if !strings.HasPrefix(e, "GOMAXPROCS=") {
				env = append(env, e)
			}
		}
		cmd.Env = env
		out := &syncbuf.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		require.NoError(t, cmd.Start())
		return cmd, out
	}
	for _, tc := range []struct {
		name     string
		args     []string
		srv, cli string // --bind
	}{
		{"TCP exchange", []string{"--udp-port", "0"}, "127.0.0.1", "127.0.0.2"},
		// rdma_cm speaks on UDP 4791: addresses no other test binds.
		{"rdma_cm", []string{"-R"}, "127.0.0.61", "127.0.0.62"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The retry budget is not this test's subject: a loaded host
			// may stall a process for longer than perftest's default
			// (-u 14, 67 ms, 7 retries).
			common := append([]string{"write-bw", "-n", "200", "-u", testutil.QPTimeoutArg, "-p", port}, tc.args...)
			srv, srvOut := start(append(common, "--bind", tc.srv)...)
			for i := 0; !strings.Contains(srvOut.String(), "Waiting for client to connect"); i++ {
				require.Less(t, i, 400, "the server did not listen: %s", srvOut)
				time.Sleep(25 * time.Millisecond)
			}
			cli, cliOut := start(append(common, "--bind", tc.cli, tc.srv)...)
			require.NoError(t, cli.Wait(), "client: %s", cliOut)
			require.NoError(t, srv.Wait(), "server: %s", srvOut)
			want := regexp.MustCompile(` Processors      : \d+ of \d+ \(the peer runs on this host; GOMAXPROCS sets it\)`)
			require.Regexp(t, want, cliOut.String())
			require.Regexp(t, want, srvOut.String())
		})
	}
}
