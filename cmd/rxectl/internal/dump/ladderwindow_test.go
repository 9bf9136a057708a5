package dump

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
)

// TestLadderTimeWindowFromFirstFrame: --ladder's --time T1-T2 counts from
// the capture's first frame, as the help says and as dump's time column
// does, even when the first frames are not RoCE. The Huawei capture's
// first RoCEv2 packet is frame 15, 16.291871 s after frame 1 (ARP, TCP
// and ICMPv6 frames come before it).
func TestLadderTimeWindowFromFirstFrame(t *testing.T) {
	const name = "../../../../testdata/captures/huawei_hiroce_oferby_proxy.pcap"
	out, errs, code := runCmd(t, "dump", name)
	require.Equal(t, cli.ExitOK, code, errs)
	require.Contains(t, out, "   15 16.291871 ")
	require.Contains(t, out, "   17 16.293852 ")
	dir := t.TempDir()
	tests := []struct {
		window     string
		has, hasnt []string
	}{
		{"16.2938-16.2939", []string{"#17<", "#22<"}, []string{"#15<", "#16<", "#23<"}},
		{"16291ms-16292ms", []string{"#15<", "#16<"}, []string{"#17<"}},
	}
	for i, tc := range tests {
		svg := filepath.Join(dir, string(rune('a'+i))+".svg")
		_, errs, code := runCmd(t, "dump", "--ladder", svg, "--time", tc.window, name)
		require.Equal(t, cli.ExitOK, code, "%s: %s", tc.window, errs)
		b, err := os.ReadFile(svg)
		require.NoError(t, err)
		for _, s := range tc.has {
			require.Contains(t, string(b), s, tc.window)
		}
		for _, s := range tc.hasnt {
			require.NotContains(t, string(b), s, tc.window)
		}
	}
}
