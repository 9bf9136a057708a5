package pcapdump_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/pcapdump"
	"github.com/gorxe/gorxe/packet"
)

// TestSentGSOIDs: a sent IPv4 datagram whose ICRC was computed for ID k
// below 64 (the k-th datagram of a UDP GSO send, UDP_MAX_SEGMENTS 64) is
// written with ID k, so its ICRC checks; any other ID is not one a gorxe
// socket sends, and the datagram is written with ID 0.
func TestSentGSOIDs(t *testing.T) {
	tests := []struct {
		id, want uint16
	}{
		{0, 0}, {1, 1}, {63, 63}, {64, 0},
	}
	for _, tc := range tests {
		a, b := netdev.NewPipe()
		var buf bytes.Buffer
		pa, err := pcapdump.Wrap(a, &buf, pcapdump.Options{})
		require.NoError(t, err)
		pkt := build(t, a.LocalAddr(), b.LocalAddr(), 1, kind{tc.id, packet.IPv4FlagDF, false})
		_, err = pa.WriteBatch([]netdev.Message{{Buf: pkt, N: len(pkt), Addr: b.LocalAddr()}})
		require.NoError(t, err)
		require.NoError(t, pa.Close())
		recs := decode(t, buf.Bytes())
		require.Len(t, recs, 1)
		require.Equal(t, tc.want, recs[0].d.Pseudo.IPID, "ID %d", tc.id)
		require.Equal(t, tc.id == tc.want, recs[0].d.ICRCOK(), "ID %d", tc.id)
	}
}

// keepOpen is a Conn whose Close leaves it working, to see what a closed
// pcapdump.Conn does with traffic that still passes.
type keepOpen struct{ netdev.Conn }

func (keepOpen) Close() error { return nil }

// TestNothingRecordedAfterClose: once the last Conn recording into a file
// is closed, the capture stops: datagrams that still pass are counted in
// Stats.Skipped and not written.
func TestNothingRecordedAfterClose(t *testing.T) {
	a, b := netdev.NewPipe()
	defer a.Close()
	var buf bytes.Buffer
	pa, err := pcapdump.Wrap(keepOpen{a}, &buf, pcapdump.Options{})
	require.NoError(t, err)
	require.NoError(t, pa.Close())
	size := buf.Len()
	pkt := build(t, a.LocalAddr(), b.LocalAddr(), 1, gorxeKind)
	n, err := pa.WriteBatch([]netdev.Message{{Buf: pkt, N: len(pkt), Addr: b.LocalAddr()}})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, pa.Flush())
	require.Equal(t, size, buf.Len(), "nothing written after Close")
	require.Equal(t, pcapdump.Stats{Skipped: 1}, pa.Stats())
}
