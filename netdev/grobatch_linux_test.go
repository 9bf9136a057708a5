package netdev

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGROReadBatchHonoursBatchSize checks that a UDPConn with UDP GRO
// returns at most BatchSize datagrams per read, whatever len(msgs), as
// Conn.ReadBatch and SharedReader.TryReadBatch promise, when a GRO buffer
// holds more, and that the rest come, in order, with the next reads.
func TestGROReadBatchHonoursBatchSize(t *testing.T) {
	skipNoIPv6(t)
	const batch = 4
	reads := []struct {
		name string
		read func(c *UDPConn, msgs []Message) (int, error)
	}{
		{"ReadBatch", (*UDPConn).ReadBatch},
		{"TryReadBatch", func(c *UDPConn, msgs []Message) (int, error) {
			for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
				if n, err := c.TryReadBatch(msgs); n > 0 || err != nil {
					return n, err
				}
			}
			return 0, errors.New("TryReadBatch found nothing for 5 s")
		}},
		{"ReadBatchGated", func(c *UDPConn, msgs []Message) (int, error) {
			var g Gate
			n, err := c.ReadBatchGated(msgs, &g)
			if n > 0 {
				g.Release()
			}
			return n, err
		}},
	}
	for _, rd := range reads {
		t.Run(rd.name, func(t *testing.T) {
			tx := listen(t, lo6, Options{})
			rx := listen(t, lo6, Options{BatchSize: batch})
			require.True(t, rx.GRO())
			ms := gsoBatch(rx.LocalAddr(), rx.LocalAddr())[:20]
			n, err := tx.WriteBatch(ms)
			require.NoError(t, err)
			require.Equal(t, 20, n)
			msgs := newMsgs(32, 10)
			next := 0
			for next < 20 {
				n, err := rd.read(rx, msgs)
				require.NoError(t, err)
				require.Positive(t, n)
				require.LessOrEqual(t, n, batch, "datagrams in one read")
				for _, m := range msgs[:n] {
					require.Equal(t, uint32(next), binary.BigEndian.Uint32(m.Buf[:m.N]))
					next++
				}
			}
			require.Equal(t, uint64(1), rx.Stats().GROBuffers)
		})
	}
}
