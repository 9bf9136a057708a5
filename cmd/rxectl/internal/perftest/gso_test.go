package perftest

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/stretchr/testify/require"
)

// TestGSOFlag runs a loopback write-bw with --gso on and off, each with a
// --pcap capture whose every ICRC must check (with GSO, the k-th packet of
// a GSO buffer has its ICRC for IPv4 ID k and the capture shows that ID),
// and rejects other values.
func TestGSOFlag(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"on", "off"} {
		file := filepath.Join(t.TempDir(), "gso.pcap")
		_, errs, code := runCmd(t, "write-bw", "--loopback", "--udp-port", "0", "-n", "50", "-s", "65536", "--gso="+v, "--pcap", file)
		require.Equal(t, cli.ExitOK, code, "--gso=%s: %s", v, errs)
		ports := regexp.MustCompile(`--port \d+ --port \d+`).FindString(errs)
		require.NotEmpty(t, ports, errs)
		args := append([]string{"dump", "--strict"}, strings.Fields(ports)...)
		_, derrs, code := runCmd(t, append(args, file)...)
		require.Equal(t, cli.ExitOK, code, "--gso=%s: %s", v, derrs)
		require.Contains(t, derrs, " 0 bad ICRC, 0 malformed")
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
