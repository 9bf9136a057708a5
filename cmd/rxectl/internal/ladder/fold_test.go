package ladder

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFoldsOnlyConsecutivePSNs: a band says "PSN a-b", so it folds only a
// run of MIDDLE packets whose PSNs follow one another (wrapping at 2^24).
// Selective repeat resends only the holes (MIDDLE packets of scattered
// PSNs, one after another on the wire): those stay rows of their own, or
// bands of their consecutive runs, instead of one band claiming the
// PSNs between them.
func TestFoldsOnlyConsecutivePSNs(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	items := func(kind Kind, psns ...uint32) []Item {
		var its []Item
		for i, psn := range psns {
			its = append(its, Item{Kind: kind, Dir: ToRight, Time: t0.Add(time.Duration(i) * time.Microsecond),
				Label: "x", Fold: "SEND_MIDDLE", PSN: psn})
		}
		return its
	}
	tests := []struct {
		name   string
		items  []Item
		labels []string
	}{
		{"consecutive", items(Request, 10, 11, 12, 13, 14), []string{"SEND_MIDDLE ×5, PSN 10-14"}},
		{"wrapping", items(Request, 0xFFFFFE, 0xFFFFFF, 0, 1), []string{"SEND_MIDDLE ×4, PSN 16777214-1"}},
		{"scattered resends", items(Resent, 105, 110, 117, 130), []string{"x", "x", "x", "x"}},
		{"two runs", items(Resent, 20, 21, 22, 23, 40, 41, 42, 43, 44), []string{"SEND_MIDDLE ×4, PSN 20-23", "SEND_MIDDLE ×5, PSN 40-44"}},
		{"a run too short", items(Resent, 20, 21, 22, 40, 41, 42, 43), []string{"x", "x", "x", "SEND_MIDDLE ×4, PSN 40-43"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &Diagram{Items: tc.items}
			var labels []string
			for _, r := range d.rows() {
				labels = append(labels, r.label())
			}
			require.Equal(t, tc.labels, labels)
		})
	}
	// Notes on a lane fold by their text: they carry no PSN range.
	notes := &Diagram{}
	for i := range 5 {
		notes.Items = append(notes.Items, Item{Kind: Note, Dir: OnRight, Time: t0.Add(time.Duration(i)), Label: "s", Fold: "s"})
	}
	require.Len(t, notes.rows(), 1)
	require.Equal(t, "s ×5", notes.rows()[0].label())
}
