package perftest

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/dump"
)

// runCmd runs an rxectl command line in this process as rxectl's command
// table would: a perftest subcommand, "help" of one, or "dump". It returns
// the output and the exit status.
func runCmd(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	switch {
	case args[0] == "dump":
		code = dump.Run(args[1:], strings.NewReader(""), &out, &errb)
	case args[0] == "help" && len(args) == 2:
		findTest(t, args[1]).Usage(&out)
	default:
		code = findTest(t, args[0]).Run(args[1:], &out, &errb, nil)
	}
	return out.String(), errb.String(), code
}

// findTest returns the subcommand named cmd.
func findTest(t testing.TB, cmd string) Test {
	t.Helper()
	for _, pt := range Tests {
		if pt.cmd == cmd {
			return pt
		}
	}
	t.Fatalf("no test %q", cmd)
	return Test{}
}
