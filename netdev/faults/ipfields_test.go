package faults_test

import (
	"testing"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/faults"
	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// TestHeldKeepIPFields: a datagram the receive side holds (reorder,
// delay) or copies (dup) comes out with the traffic class it arrived with,
// and ReportIPFields reaches the wrapped Conn.
func TestHeldKeepIPFields(t *testing.T) {
	for _, rule := range []string{"reorder=#1,dir=recv", "delay=#1,dir=recv", "dup=#1,dir=recv", "drop=0,dir=recv"} {
		t.Run(rule, func(t *testing.T) {
			a, b := netdev.NewPipe()
			fb := faults.Wrap(b, faults.Config{Seed: 1, Rules: mustRules(t, rule)})
			defer a.Close()
			defer fb.Close()
			var r netdev.IPFieldReporter = fb
			require.NoError(t, r.ReportIPFields())
			for psn := range 3 {
				m := message(roce(t, packet.RCSendOnly, psn))
				m.TOS = 0x2e
				_, err := a.WriteBatch([]netdev.Message{m})
				require.NoError(t, err)
			}
			msgs := make([]netdev.Message, fb.BatchSize())
			for i := range msgs {
				msgs[i].Buf = make([]byte, 2048)
			}
			got := 0
			for got < 3 {
				n, err := fb.ReadBatch(msgs)
				require.NoError(t, err)
				for _, m := range msgs[:n] {
					require.Equal(t, uint8(0x2e), m.TOS, "PSN %d", packet.BTH(m.Buf[:m.N]).PSN())
				}
				got += n
			}
		})
	}
}
