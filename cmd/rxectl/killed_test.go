package main

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/syncbuf"
)

// startRxectl starts this test binary as rxectl with args (TestMain),
// its stdout and stderr going to the returned buffer.
func startRxectl(t *testing.T, ctx context.Context, args ...string) (*exec.Cmd, *syncbuf.Buffer) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), "RXECTL_TEST_MAIN=1")
	out := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	return cmd, out
}

// waitFor polls out until it contains s, for at most 10 s.
func waitFor(t *testing.T, out *syncbuf.Buffer, s string) {
	t.Helper()
	for i := 0; !strings.Contains(out.String(), s); i++ {
		require.Less(t, i, 1000, "no %q in:\n%s", s, out)
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSendBWServerOfKilledClient: a send-bw server whose client process
// dies in the middle of the run sees the exchange's connection close,
// prints the row of what arrived and fails at once, instead of waiting
// a minute for messages that will never come.
func TestSendBWServerOfKilledClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	common := []string{"send-bw", "-n", "5000000", "-s", "64", "-p", port, "--udp-port", "0"}
	srv, srvOut := startRxectl(t, ctx, append(common, "--bind", "127.0.0.1")...)
	waitFor(t, srvOut, "Waiting for client to connect")
	cli, cliOut := startRxectl(t, ctx, append(common, "--bind", "127.0.0.2", "127.0.0.1")...)
	waitFor(t, cliOut, " #bytes")
	time.Sleep(300 * time.Millisecond) // sending
	require.NoError(t, cli.Process.Kill())
	cli.Wait()
	killed := time.Now()

	done := make(chan error, 1)
	go func() { done <- srv.Wait() }()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		srv.Process.Kill()
		<-done
		t.Fatalf("the server still runs 10 s after its client died:\n%s", srvOut)
	}
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "server: %v\n%s", err, srvOut)
	require.Equal(t, 1, ee.ExitCode(), srvOut.String())
	require.Less(t, time.Since(killed), 5*time.Second)
	require.Contains(t, srvOut.String(), " of 5000000 messages of 64 bytes: the client stopped sending before the rest arrived\n")
	require.Contains(t, srvOut.String(), "the peer closed the connection")
}
