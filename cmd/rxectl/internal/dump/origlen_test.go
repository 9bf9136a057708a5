package dump

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
)

// TestPcapRecordLongerThanOnTheWire: a classic pcap record whose captured
// length exceeds its original length (a writer's slip) is read, as
// Wireshark reads it, and the records after it too, in either byte
// order: such a record must not end the dump of the whole file.
func TestPcapRecordLongerThanOnTheWire(t *testing.T) {
	frames := readPcap(t, cx4Pcap)
	require.GreaterOrEqual(t, len(frames), 2)
	want, wantErr, code := runCmd(t, "dump", cx4Pcap)
	require.Equal(t, cli.ExitOK, code, wantErr)
	for _, o := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		// Record 1 follows the 24-byte file header; its original length
		// is the header's last word. Claim 14 bytes on the wire, or one
		// byte fewer than were captured.
		for _, claim := range []int{14, len(frames[0].data) - 1} {
			b := pcapBytesOrder(o.(binary.AppendByteOrder), false, 1, frames)
			o.PutUint32(b[24+12:], uint32(claim))
			got, gotErr, code := runCmd(t, "dump", writeFile(t, "origlen.pcap", b))
			require.Equal(t, cli.ExitOK, code, gotErr)
			require.Equal(t, want, got, "%d bytes claimed", claim)
			require.Equal(t, strings.Count(want, "\n"), strings.Count(got, "\n"))
		}
	}
}
