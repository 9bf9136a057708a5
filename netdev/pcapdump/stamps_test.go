package pcapdump

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/gopacket/pcapgo"
	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev"
)

// TestStampsNeverGoBack: a record stamped before the file's last record
// (it waited for the capture's lock behind a later-stamped one) takes
// that record's time.
func TestStampsNeverGoBack(t *testing.T) {
	a, b := netdev.NewPipe()
	defer a.Close()
	var buf bytes.Buffer
	c, err := Wrap(a, &buf, Options{})
	require.NoError(t, err)
	msgs := []netdev.Message{{Buf: []byte("abcdefghijklmnop"), N: 16, Addr: b.LocalAddr()}}
	t0 := time.Unix(1_700_000_000, 500)
	c.mu.Lock()
	c.record(msgs, true, t0.Add(time.Millisecond))
	c.record(msgs, false, t0)
	c.record(msgs, true, t0.Add(2*time.Millisecond))
	c.mu.Unlock()
	require.NoError(t, c.Flush())
	r, err := pcapgo.NewReader(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	var got []time.Time
	for {
		_, ci, err := r.ReadPacketData()
		if err != nil {
			break
		}
		got = append(got, ci.Timestamp)
	}
	require.Len(t, got, 3)
	require.True(t, got[0].Equal(t0.Add(time.Millisecond)))
	require.True(t, got[1].Equal(t0.Add(time.Millisecond)), "took the later record's time")
	require.True(t, got[2].Equal(t0.Add(2*time.Millisecond)))
}
