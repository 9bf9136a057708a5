package dump

import (
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/stretchr/testify/require"
)

// TestPcapNgBinaryResolution: a pcapng interface may give its time
// stamps in binary fractions (if_tsresol with the high bit set: 2^-e s).
// A frame stamped 1700000000 s + 2^(e-1) units is at .500000000 s;
// tshark prints 1700000000.500000000. gopacket's reader scales the
// fraction by floor(1e9 / 2^e) below 2^-30 and divides it by
// floor(2^e / 1e9) from 2^-30 on: it gave .499646464 at 2^-20,
// .536870912 at 2^-30 and 2^-32, and at 2^-32 carried .9375 s into the
// next second (1700000001.006632960).
func TestPcapNgBinaryResolution(t *testing.T) {
	tests := []struct {
		e    byte
		ns   int
		want string
	}{
		{20, 500000000, " 1700000000.500000000 "},
		{29, 500000000, " 1700000000.500000000 "},
		{30, 500000000, " 1700000000.500000000 "},
		{32, 500000000, " 1700000000.500000000 "},
		{32, 937500000, " 1700000000.937500000 "},
		{33, 250000000, " 1700000000.250000000 "},
	}
	for _, tc := range tests {
		b := pcapngBytesRes(1, 0x80|tc.e, []capFrame{{scapyFrame(t, 1), gopacket.CaptureInfo{Timestamp: time.Unix(1700000000, int64(tc.ns))}}})
		path := writeFile(t, "binres.pcapng", b)
		out, errOut, code := runCmd(t, "dump", "--time", "epoch", "--nano", path)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, tc.want, "2^-%d", tc.e)
	}
}
