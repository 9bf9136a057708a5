package perftest

import (
	"testing"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/stretchr/testify/require"
)

// TestGSOFlag runs a loopback write-bw with --gso on and off, and rejects
// other values.
func TestGSOFlag(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"on", "off"} {
		_, errs, code := runCmd(t, "write-bw", "--loopback", "--udp-port", "0", "-n", "50", "-s", "65536", "--gso="+v)
		require.Equal(t, cli.ExitOK, code, "--gso=%s: %s", v, errs)
	}
	_, errs, code := runCmd(t, "write-bw", "--loopback", "--udp-port", "0", "--gso=maybe")
	require.NotEqual(t, cli.ExitOK, code)
	require.Contains(t, errs, `--gso: "maybe" is not on or off`)
}

func TestGSOFlagValue(t *testing.T) {
	var f gsoFlag
	require.Equal(t, "on", f.String())
	require.NoError(t, f.Set("off"))
	require.True(t, bool(f))
	require.Equal(t, "off", f.String())
	require.NoError(t, f.Set("on"))
	require.False(t, bool(f))
	require.Error(t, f.Set(""))
}
