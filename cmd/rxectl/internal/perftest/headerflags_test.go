package perftest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
)

// TestHeaderOnlyFlags: perftest's --use_old_post_send,
// --disable_pcie_relaxed and --no_lock are taken (a command line written
// for perftest runs) and shown where perftest shows them: the header's
// "ibv_wr* API", "PCIe relax order" and "Lock-free", and --out_json's
// "ibv_wr_API" and "PCIe_relax_order".
func TestHeaderOnlyFlags(t *testing.T) {
	t.Parallel()
	base := []string{"write-bw", "--loopback", "--udp-port", "0", "-n", "20", "-s", "64"}
	out, errs, code := runCmd(t, base...)
	require.Equal(t, cli.ExitOK, code, errs)
	require.Contains(t, out, " PCIe relax order: ON\t\tLock-free      : OFF\n ibv_wr* API     : ON\t\tUsing Enhanced Reorder      : OFF\n")

	args := append(base, "--use_old_post_send", "--disable_pcie_relaxed", "--no_lock")
	out, errs, code = runCmd(t, args...)
	require.Equal(t, cli.ExitOK, code, errs)
	require.Contains(t, out, " PCIe relax order: OFF\t\tLock-free      : ON\n ibv_wr* API     : OFF\t\tUsing Enhanced Reorder      : OFF\n")
	doc, _ := readOutJSON(t, args...)
	require.Equal(t, "OFF", doc.TestInfo["ibv_wr_API"])
	require.Equal(t, "OFF", doc.TestInfo["PCIe_relax_order"])
}
