package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
	start := func(args ...string) (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.CommandContext(ctx, exe, args...)
		env := []string{"RXECTL_TEST_MAIN=1"}
		for _, e := range os.Environ() {
			if len(e) < 11 || e[:11] != "GOMAXPROCS=" {
				env = append(env, e)
			}
		}
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Start())
		return cmd, &out
	}
	common := []string{"write-bw", "-n", "200", "--udp-port", "0", "-p", port}
	srv, srvOut := start(append(common, "--bind", "127.0.0.1")...)
	var cliOut *bytes.Buffer
	for i := 0; ; i++ { // until the server listens: a refused client exits at once
		var cli *exec.Cmd
		cli, cliOut = start(append(common, "--bind", "127.0.0.2", "127.0.0.1")...)
		err := cli.Wait()
		if err == nil || !bytes.Contains(cliOut.Bytes(), []byte("connection refused")) {
			require.NoError(t, err, "client: %s", cliOut)
			break
		}
		require.Less(t, i, 200, "the server did not listen: %s", srvOut)
		time.Sleep(25 * time.Millisecond)
	}
	require.NoError(t, srv.Wait(), "server: %s", srvOut)
	want := regexp.MustCompile(` Processors      : \d+ of \d+ \(the peer runs on this host; GOMAXPROCS sets it\)`)
	require.Regexp(t, want, cliOut.String())
	require.Regexp(t, want, srvOut.String())
}
