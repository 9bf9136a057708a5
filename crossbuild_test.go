package gorxe

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// crossGOOS are the platforms every package of the module builds for
// besides Linux, with the go command that checks it: the library's
// unix-only calls (getrusage, control messages, /proc) sit in files with
// build constraints. On darwin, where developers run the tests too, go vet
// type-checks the test files as well; on windows the packages are built.
var crossGOOS = []struct{ goos, check string }{{"windows", "build"}, {"darwin", "vet"}}

// TestCrossBuild builds or vets the module's packages (./..., build
// results discarded) for each of crossGOOS, so that a unix-only call in a
// file without a build constraint fails here rather than on a user's
// machine. The go command caches the work; it skips without a go
// command on PATH.
func TestCrossBuild(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH: %v", err)
	}
	for _, p := range crossGOOS {
		t.Run(p.goos, func(t *testing.T) {
			t.Parallel()
			args := []string{p.check, "./..."}
			if p.check == "build" {
				args = []string{"build", "-o", os.DevNull, "./..."}
			}
			cmd := exec.Command(goCmd, args...)
			cmd.Env = append(os.Environ(), "GOOS="+p.goos, "GOARCH=amd64", "CGO_ENABLED=0", "GOFLAGS="+withoutRace(os.Getenv("GOFLAGS")))
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "GOOS=%s go %s ./...:\n%s", p.goos, p.check, out)
		})
	}
}

// withoutRace returns the flags of a GOFLAGS value without -race: a race
// build needs cgo, which a cross build turns off, and the race detector
// has nothing to do with whether the packages build.
func withoutRace(goflags string) string {
	var keep []string
	for _, f := range strings.Fields(goflags) {
		if f != "-race" && f != "--race" && !strings.HasPrefix(f, "-race=") && !strings.HasPrefix(f, "--race=") {
			keep = append(keep, f)
		}
	}
	return strings.Join(keep, " ")
}
