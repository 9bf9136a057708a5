package perftest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
)

// TestMemoryRefused: a test whose buffers and timestamps exceed the
// available memory is refused with the figures, instead of crashing in
// the Go runtime ("fatal error: runtime: out of memory") or being killed.
// Not parallel: it pretends a machine with 1 MiB available.
func TestMemoryRefused(t *testing.T) {
	was := memAvailable
	t.Cleanup(func() { memAvailable = was })
	memAvailable = func() (uint64, bool) { return 1 << 20, true }
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"write-bw", "-s", "65536", "-q", "8", "-n", "5"},
			"the test needs 2.0 MiB of memory (buffers of 2 × 8 QPs × 64.0 KiB and 640 B of timestamps, for each of the two ends of --loopback), more than the 1.0 MiB available: use a smaller -s, -q or -n"},
		{[]string{"send-lat", "-n", "200000"}, "(buffers of 2 × 1 QPs × 4.0 KiB and 1.5 MiB of timestamps, for each of the two ends of --loopback)"},
	} {
		_, errs, code := runCmd(t, append(tc.args, "--loopback", "--udp-port", "0")...)
		require.Equal(t, cli.ExitFail, code, errs)
		require.Contains(t, errs, tc.want)
	}
	memAvailable = func() (uint64, bool) { return 64 << 20, true }
	_, errs, code := runCmd(t, "write-bw", "-s", "65536", "-q", "8", "-n", "5", "--loopback", "--udp-port", "0")
	require.Equal(t, cli.ExitOK, code, errs)
}
