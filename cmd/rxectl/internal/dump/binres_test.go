package dump

import (
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/stretchr/testify/require"
)

// TestPcapNgBinaryResolution: a pcapng interface may give its time
// stamps in binary fractions (if_tsresol with the high bit set: 2^-20 s
// here). A frame stamped 1700000000 s + 2^19 units is at .500000000 s;
// tshark prints 1700000000.500000000. gopacket's reader gave .499646464
// (it scales by floor(1e9 / 2^20)), which Capture.Next corrects.
func TestPcapNgBinaryResolution(t *testing.T) {
	b := pcapngBytesRes(1, 0x80|20, []capFrame{{scapyFrame(t, 1), gopacket.CaptureInfo{Timestamp: time.Unix(1700000000, 500000000)}}})
	path := writeFile(t, "binres.pcapng", b)
	out, errOut, code := runCmd(t, "dump", "--time", "epoch", "--nano", path)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, " 1700000000.500000000 ")
}
