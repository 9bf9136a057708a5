package ladder

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows/flowstest"
)

// TestBadICRCNotDrawn checks that packets with a bad ICRC, which the
// receiver dropped, are not drawn: the diagram of a capture that holds
// them is the one of the capture without them, but for the marks of the
// gaps they carried the PSNs of. Those say "corrupted" and name the bad
// packet's frame, as dump --flows explains them ("corrupted before the
// capture point"), where without the bad packets they say "lost"; they
// used to say "lost" either way. testdata/corrupt.pcap's 6 one-PSN gaps
// were all corrupted (psn_corrupt 6).
func TestBadICRCNotDrawn(t *testing.T) {
	all := readPcap(t, "../flows/testdata/corrupt.pcap")
	good := slices.DeleteFunc(slices.Clone(all), func(p flows.Packet) bool { return p.BadICRC })
	require.Less(t, len(good), len(all), "the capture holds packets with a bad ICRC")
	badFrames := map[int]bool{}
	for _, p := range all {
		if p.BadICRC {
			badFrames[p.Frame] = true
		}
	}
	for _, sel := range []Selection{{}, {FromFrame: 10, ToFrame: 40}} {
		want, err := FromCapture(good, flowstest.Analyse(good, flows.Options{}), sel)
		require.NoError(t, err)
		got, err := FromCapture(all, flowstest.Analyse(all, flows.Options{}), sel)
		require.NoError(t, err)
		require.Len(t, got.Items, len(want.Items))
		corrupted := 0
		for i := range want.Items {
			w, g := want.Items[i], got.Items[i]
			if w.Kind == Lost && !w.Cut && strings.HasPrefix(g.Label, "corrupted: ") {
				span, ok := strings.CutPrefix(w.Label, "lost: ")
				require.True(t, ok, w.Label)
				var frame int
				_, err := fmt.Sscanf(strings.TrimPrefix(g.Label, "corrupted: "+span), " (bad ICRC, frame %d)", &frame)
				require.NoError(t, err, "%q", g.Label)
				require.True(t, badFrames[frame], "frame %d has a bad ICRC", frame)
				g.Label = w.Label
				corrupted++
			}
			require.Equal(t, w, g, "%+v item %d", sel, i)
		}
		if sel.ToFrame == 0 {
			require.Equal(t, 6, corrupted)
		} else {
			require.NotZero(t, corrupted)
		}
	}
}
