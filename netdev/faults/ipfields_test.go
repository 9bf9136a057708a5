package faults_test

import (
	"testing"
	"testing/synctest"

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

// TestReceiveKeepsTTL: a datagram the receive side holds (reorder, delay),
// copies (dup) or corrupts comes out with the TTL (hop limit) the inner
// Conn reported for it, as it does its traffic class.
func TestReceiveKeepsTTL(t *testing.T) {
	for _, rule := range []string{"reorder=#1,dir=recv", "delay=#1,dir=recv", "dup=#1,dir=recv", "corrupt=#1,dir=recv", "drop=#9,dir=recv"} {
		t.Run(rule, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var in []netdev.Message
				for psn := range 3 {
					m := message(roce(t, packet.RCSendOnly, psn))
					m.TOS, m.TTL = 0x2e, uint8(60+psn)
					in = append(in, m)
				}
				fb := faults.Wrap(newFeeder(in, true), faults.Config{Seed: 1, Rules: mustRules(t, rule)})
				defer fb.Close()
				msgs := make([]netdev.Message, fb.BatchSize())
				for i := range msgs {
					msgs[i].Buf = make([]byte, 2048)
				}
				for got := 0; got < 3; {
					n, err := fb.ReadBatch(msgs)
					require.NoError(t, err)
					for _, m := range msgs[:n] {
						psn := int(packet.BTH(m.Buf[:m.N]).PSN())
						require.Equal(t, uint8(0x2e), m.TOS, "PSN %d", psn)
						require.Equal(t, uint8(60+psn), m.TTL, "PSN %d", psn)
					}
					got += n
				}
			})
		})
	}
}
