package dump

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPcapNgBinaryResolution: a pcapng interface may give its time
// stamps in binary fractions (if_tsresol with the high bit set: 2^-20 s
// here). A frame stamped 1700000000 s + 2^19 units is at .500000000 s;
// tshark prints 1700000000.500000000. gopacket's reader gave .499646464
// (it scales by floor(1e9 / 2^20)), which Capture.Next corrects.
func TestPcapNgBinaryResolution(t *testing.T) {
	frame := scapyFrame(t, 1)
	le := binary.LittleEndian
	var b []byte
	b = le.AppendUint32(b, 0x0A0D0D0A)
	b = le.AppendUint32(b, 28)
	b = le.AppendUint32(b, 0x1A2B3C4D)
	b = le.AppendUint16(b, 1)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint64(b, ^uint64(0))
	b = le.AppendUint32(b, 28)
	b = le.AppendUint32(b, 1) // IDB, if_tsresol = 0x80|20
	b = le.AppendUint32(b, 32)
	b = le.AppendUint16(b, 1)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint32(b, 0)
	b = le.AppendUint16(b, 9)
	b = le.AppendUint16(b, 1)
	b = append(b, 0x80|20, 0, 0, 0)
	b = le.AppendUint32(b, 0)
	b = le.AppendUint32(b, 32)
	ts := uint64(1700000000)<<20 | 1<<19
	padded := (len(frame) + 3) &^ 3
	total := uint32(32 + padded)
	b = le.AppendUint32(b, 6)
	b = le.AppendUint32(b, total)
	b = le.AppendUint32(b, 0)
	b = le.AppendUint32(b, uint32(ts>>32))
	b = le.AppendUint32(b, uint32(ts))
	b = le.AppendUint32(b, uint32(len(frame)))
	b = le.AppendUint32(b, uint32(len(frame)))
	b = append(b, frame...)
	b = append(b, make([]byte, padded-len(frame))...)
	b = le.AppendUint32(b, total)
	path := writeFile(t, "binres.pcapng", b)
	out, errOut, code := runCmd(t, "dump", "--time", "epoch", "--nano", path)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, " 1700000000.500000000 ")
}
