package main

import (
	"bytes"
	"testing"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/stretchr/testify/require"
)

// runCmd runs rxectl with args and returns its output and exit status.
func runCmd(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestDispatch(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		code       int
		wantStdout string // substring; "" means stdout must be empty
		wantStderr string // substring; "" means stderr must be empty
	}{
		{name: "no command", args: nil, code: cli.ExitUsage, wantStderr: "Usage:"},
		{name: "unknown command", args: []string{"bogus"}, code: cli.ExitUsage, wantStderr: "rxectl: unknown command \"bogus\"\n\nrxectl is the command-line tool"},
		{name: "help", args: []string{"help"}, code: cli.ExitOK, wantStdout: "\tdump        decode the RoCEv2 packets"},
		{name: "--help", args: []string{"--help"}, code: cli.ExitOK, wantStdout: "Commands:"},
		{name: "help dump", args: []string{"help", "dump"}, code: cli.ExitOK, wantStdout: "usage: rxectl dump [flags] FILE"},
		{name: "help unknown", args: []string{"help", "bogus"}, code: cli.ExitUsage, wantStderr: "unknown command \"bogus\""},
		{name: "help too many", args: []string{"help", "dump", "x"}, code: cli.ExitUsage, wantStderr: "usage: rxectl help [command]"},
		{name: "version", args: []string{"version"}, code: cli.ExitOK, wantStdout: "rxectl "},
		{name: "dump -h", args: []string{"dump", "-h"}, code: cli.ExitOK, wantStdout: "-json"},
		{name: "dump --help lists flags", args: []string{"dump", "--help"}, code: cli.ExitOK, wantStdout: "-port N"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCmd(t, tc.args...)
			require.Equal(t, tc.code, code)
			if tc.wantStdout == "" {
				require.Empty(t, stdout)
			} else {
				require.Contains(t, stdout, tc.wantStdout)
			}
			if tc.wantStderr == "" {
				require.Empty(t, stderr)
			} else {
				require.Contains(t, stderr, tc.wantStderr)
			}
		})
	}
}
