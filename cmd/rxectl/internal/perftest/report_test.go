package perftest

import (
	"testing"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/oob"
	"github.com/stretchr/testify/require"
)

func TestAddrLines(t *testing.T) {
	k := oob.KeyMsg{QPN: 0x11, PSN: 0x8d6a0b, OutReads: 0x80, RKey: 0x1234, VAddr: 0x7f2e5f64b000,
		GID: [16]byte{10: 255, 11: 255, 12: 192, 13: 168, 14: 1, 15: 7}}
	require.Equal(t, " local address: LID 0000 QPN 0x0011 PSN 0x8d6a0b OUT 0x80 RKey 0x001234 VAddr 0x007f2e5f64b000\n"+
		" GID: 00:00:00:00:00:00:00:00:00:00:255:255:192:168:01:07\n", addrLines("local", verbRead, k))
	require.Equal(t, " remote address: LID 0000 QPN 0x0011 PSN 0x8d6a0b RKey 0x001234 VAddr 0x007f2e5f64b000\n"+
		" GID: 00:00:00:00:00:00:00:00:00:00:255:255:192:168:01:07\n", addrLines("remote", verbWrite, k))
	k.PSN = 0
	require.Equal(t, " local address: LID 0000 QPN 0x0011 PSN 000000\n GID: 00:00:00:00:00:00:00:00:00:00:255:255:192:168:01:07\n",
		addrLines("local", verbSend, k))
}
