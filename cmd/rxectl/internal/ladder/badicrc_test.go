package ladder

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows/flowstest"
)

// TestBadICRCNotDrawn checks that packets with a bad ICRC, which the
// receiver dropped, are not drawn: the diagram of a capture that holds
// them is the one of the capture without them.
func TestBadICRCNotDrawn(t *testing.T) {
	all := readPcap(t, "../flows/testdata/corrupt.pcap")
	good := slices.DeleteFunc(slices.Clone(all), func(p flows.Packet) bool { return p.BadICRC })
	require.Less(t, len(good), len(all), "the capture holds packets with a bad ICRC")
	for _, sel := range []Selection{{}, {FromFrame: 10, ToFrame: 40}} {
		want, err := FromCapture(good, flowstest.Analyse(good, flows.Options{}), sel)
		require.NoError(t, err)
		got, err := FromCapture(all, flowstest.Analyse(all, flows.Options{}), sel)
		require.NoError(t, err)
		require.Equal(t, want, got, "%+v", sel)
	}
}
