package pcapdump

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/google/gopacket/pcapgo"
	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev"
)

// TestRecordsWithinSnaplen: the file header's snapshot length is
// 65535, and a pcap record's captured length must not exceed it (libpcap
// cuts such a record to the snapshot length on reading). The largest UDP
// payload synthesize accepts gives a 65549-byte frame over IPv4.
func TestRecordsWithinSnaplen(t *testing.T) {
	a, b := netdev.NewPipe()
	defer b.Close()
	var out bytes.Buffer
	c, err := Wrap(a, &out, Options{})
	require.NoError(t, err)
	size := maxUDPPayload
	m := []netdev.Message{{Buf: make([]byte, size), N: size, Addr: b.LocalAddr()}}
	n, err := c.WriteBatch(m)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, c.Close())
	f := out.Bytes()
	snaplen := binary.LittleEndian.Uint32(f[16:20])
	caplen := binary.LittleEndian.Uint32(f[24+8 : 24+12])
	t.Logf("snaplen %d, record caplen %d", snaplen, caplen)
	r, err := pcapgo.NewReader(bytes.NewReader(f))
	require.NoError(t, err)
	_, _, rerr := r.ReadPacketData()
	require.NoError(t, rerr, "pcapgo reads the record back")
	require.LessOrEqual(t, caplen, snaplen)
}
