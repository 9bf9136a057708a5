package dump

import (
	"bytes"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/stretchr/testify/require"
)

// TestCaptureMemoryFollowsRecords: reading a classic pcap file takes
// memory for the records it holds, not for the largest record it could
// hold (maxSnaplen), nor a read buffer longer than a file whose length
// the reader tells (a bytes.Reader): a file of one 100-byte record costs
// under 16 KiB, not 64 KiB of buffer and 256 KiB of record (each run of
// FuzzDump opens its input four times).
func TestCaptureMemoryFollowsRecords(t *testing.T) {
	frame := make([]byte, 100)
	file := pcapBytes(1, []capFrame{{frame, gopacket.CaptureInfo{Timestamp: time.Unix(1700000000, 0), CaptureLength: len(frame), Length: len(frame)}}})
	read := func() {
		c, err := Open(bytes.NewReader(file))
		require.NoError(t, err)
		rec, err := c.Next()
		require.NoError(t, err)
		require.Equal(t, frame, rec.Data)
		_, err = c.Next()
		require.Equal(t, io.EOF, err)
	}
	read() // package-level caches, if any
	least := ^uint64(0)
	for range 3 { // the least of three: another goroutine may allocate meanwhile
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		read()
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	require.Less(t, least, uint64(16<<10), "bytes allocated to read one 100-byte record")
}
