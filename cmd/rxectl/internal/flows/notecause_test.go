package flows_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows/flowstest"
)

// TestNoteCauseMatchesRecovery: the note on the packet that opened a
// recovery episode (what the ladder labels its first resent packet with)
// names the episode's cause, as the episode itself reports it, in every
// lossy capture of the flows and ladder tests. In testdata/corrupt.pcap
// the requester's first resend (frame 91) turns out to be a selective
// resend once the round skips a PSN that arrived: the episode said so,
// and its note has to as well.
func TestNoteCauseMatchesRecovery(t *testing.T) {
	files, err := filepath.Glob("testdata/*.pcap")
	require.NoError(t, err)
	files = append(files, "../ladder/testdata/read_lossy.pcap")
	episodes := 0
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			pkts, err := flowstest.ReadPcap(file)
			require.NoError(t, err)
			rep := flowstest.Analyse(pkts, flows.Options{})
			for _, c := range rep.Connections {
				for i, ep := range c.Recoveries {
					episodes++
					var causes []flows.Cause
					for ref, n := range rep.Notes {
						if ref.Frame == ep.RewindFrame && n.Cause != "" {
							causes = append(causes, n.Cause)
						}
					}
					require.Equal(t, []flows.Cause{ep.Cause}, causes,
						"recovery %d (rewind at frame %d): the cause on its first resent packet", i+1, ep.RewindFrame)
				}
			}
		})
	}
	require.NotZero(t, episodes)
}
