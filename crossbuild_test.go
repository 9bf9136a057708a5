package gorxe

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// crossGOOS are the platforms every package of the module builds for
// besides Linux: the library's unix-only calls (getrusage, control
// messages, /proc) sit in files with build constraints.
var crossGOOS = []string{"windows", "darwin"}

// TestCrossBuild builds the module's packages (go build ./..., the
// results discarded) for each of crossGOOS, so that a unix-only call in a
// file without a build constraint fails here rather than on a user's
// machine. The go command caches the builds; it skips without a go
// command on PATH.
func TestCrossBuild(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH: %v", err)
	}
	for _, goos := range crossGOOS {
		t.Run(goos, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(goCmd, "build", "-o", os.DevNull, "./...")
			cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=amd64", "CGO_ENABLED=0")
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "GOOS=%s go build ./...:\n%s", goos, out)
		})
	}
}
