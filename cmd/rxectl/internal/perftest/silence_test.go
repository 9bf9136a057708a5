package perftest

import (
	"context"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/oob"
)

// TestExchangeSilentAfterSetup: a TCP peer that answers the setup
// exchanges and then falls silent ends the run once neither the exchange
// nor the test QPs have moved for the silence bound (stallTimeout, 2 s
// here), with that cause. The waits after the setup had no bound: the
// client waited for the key message forever.
func TestExchangeSilentAfterSetup(t *testing.T) {
	tst := findTest(t, "write-bw")
	o, err := parsePerftest(tst, []string{"-n", "5", "--udp-port", "0", "--bind", "127.0.0.1"})
	require.NoError(t, err)
	o.hooks.setupTimeout = 200 * time.Millisecond
	o.hooks.silence = 2 * time.Second
	o.host, o.oobPort = "127.0.0.1", fakePeer(t, oob.VersionMsg(4791), oob.KeyMsg{}, 0)
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- runClient(context.Background(), tst, o, io.Discard) }()
	select {
	case err := <-done:
		require.ErrorContains(t, err, "the peer sent nothing on the exchange and no packet came from or went to it for 2s")
		require.GreaterOrEqual(t, time.Since(start), 2*time.Second, "not before the bound")
	case <-time.After(20 * time.Second):
		t.Fatal("the client still waits for the key message 20 s after the peer fell silent (bound 2 s)")
	}
}

// TestHostileKeyGIDs: a key message whose GID is not a host's unicast
// address (multicast, broadcast, unspecified) or whose QPN is 0 is
// refused with that reason before any packet goes out. Multicast and
// broadcast GIDs were taken, and the run ended in RETRY_EXC_ERR blaming
// the address.
func TestHostileKeyGIDs(t *testing.T) {
	gid4 := func(a, b, c, d byte) [16]byte { return [16]byte{10: 0xff, 11: 0xff, 12: a, 13: b, 14: c, 15: d} }
	good := oob.KeyMsg{OutReads: 1, QPN: 0x11, PSN: 0x1234, RKey: 0x1234, VAddr: 0x7f0000001000, GID: gid4(127, 0, 0, 1)}
	for _, tc := range []struct {
		name string
		mut  func(k *oob.KeyMsg)
		want string
	}{
		{"multicast", func(k *oob.KeyMsg) { k.GID = gid4(224, 0, 0, 1) }, "not the unicast IP address of a host"},
		{"broadcast", func(k *oob.KeyMsg) { k.GID = gid4(255, 255, 255, 255) }, "not the unicast IP address of a host"},
		{"unspecified", func(k *oob.KeyMsg) { k.GID = [16]byte{} }, "not the unicast IP address of a host"},
		{"zero QPN", func(k *oob.KeyMsg) { k.QPN = 0 }, "destination QPN 0x0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := good
			tc.mut(&key)
			port := fakePeer(t, oob.VersionMsg(4791), key, 1)
			_, errs, code := runCmd(t, "write-bw", "127.0.0.1", "-p", strconv.Itoa(port), "--udp-port", "0", "--bind", "127.0.0.2", "-n", "5", "-u", "6")
			require.Equal(t, cli.ExitFail, code, errs)
			require.Contains(t, errs, tc.want)
			require.NotContains(t, errs, "RETRY_EXC_ERR")
		})
	}
}
