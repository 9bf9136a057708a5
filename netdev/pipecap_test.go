package netdev

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPipeCapacityRules: a PipeConn takes N up to cap(Buf) on write and
// receives into Buf[:cap(Buf)], whatever len(Buf) is (Message), and drops a
// datagram one byte longer than cap(Buf) as truncated.
func TestPipeCapacityRules(t *testing.T) {
	tests := []struct {
		name      string
		data      string
		readCap   int
		want      string // "" when dropped
		truncated uint64
	}{
		{"fits cap exactly", "abcd", 4, "abcd", 0},
		{"one byte beyond cap", "abcde", 4, "", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := NewPipe()
			defer a.Close()
			// Buf of length 0: N reaches into the capacity.
			src := []byte(tc.data)[:0]
			n, err := a.WriteBatch([]Message{
				{Buf: src, N: len(tc.data), Addr: b.LocalAddr()},
				{Buf: []byte("next"), N: 4, Addr: b.LocalAddr()},
			})
			require.NoError(t, err)
			require.Equal(t, 2, n)
			msgs := []Message{{Buf: make([]byte, 0, tc.readCap)}, {Buf: make([]byte, 0, tc.readCap)}}
			var got []string
			for len(got) < 2-int(tc.truncated) {
				n, err := b.ReadBatch(msgs)
				require.NoError(t, err)
				for _, m := range msgs[:n] {
					got = append(got, string(m.Buf[:m.N]))
				}
			}
			want := []string{"next"}
			if tc.want != "" {
				want = []string{tc.want, "next"}
			}
			require.Equal(t, want, got)
			require.Equal(t, tc.truncated, b.Stats().Truncated)
		})
	}
}

// TestPipeDropAllocs: a write refused by a full queue recycles its copy,
// so retrying against a full pipe allocates nothing.
func TestPipeDropAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful with -race")
	}
	a, b := NewPipeWith(PipeOptions{Depth: 1})
	defer a.Close()
	msgs := []Message{{Buf: make([]byte, 1056), N: 1056, Addr: b.LocalAddr()}}
	_, err := a.WriteBatch(msgs)
	require.NoError(t, err)
	refused := func() {
		if _, err := a.WriteBatch(msgs); err == nil {
			t.Fatal("the full pipe took a datagram")
		}
	}
	refused()
	require.Zero(t, testing.AllocsPerRun(50, refused))
}
