package flows

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// FuzzAnalyze feeds packet sequences made from the fuzzer's bytes (five
// bytes a packet: direction and opcode, PSN low bits, syndrome, time step)
// to the analysis. Properties: it never panics; every packet is counted
// once in one flow; gaps, rewinds and messages never exceed the packets;
// every recovery episode lies within the capture, in frame order; the
// explanation is empty exactly when nothing went wrong.
func FuzzAnalyze(f *testing.F) {
	f.Add([]byte{0x04, 0, 0, 1, 0x84, 1, 0x1f, 1, 0x04, 3, 0, 1, 0x84, 3, 0x60, 1})
	f.Add([]byte{0x0c, 0, 0, 1, 0x8d, 0, 0x1f, 1, 0x8e, 1, 0, 1, 0x8f, 3, 0x1f, 1, 0x0c, 2, 0, 50})
	f.Fuzz(func(t *testing.T, data []byte) {
		var ps []pk
		us := 0
		for len(data) >= 4 {
			op := packet.Opcode(data[0] & 0x1f)
			if !op.Valid() {
				op = packet.RCSendOnly
			}
			p := pk{us: us, fromB: data[0]&0x80 != 0, op: op, psn: uint32(data[1]) | uint32(binary.BigEndian.Uint16([]byte{0, data[0] & 0x60}))<<8,
				syn: packet.Syndrome(data[2] & 0x7f), ackReq: data[2]&0x80 != 0, dmaLen: uint32(data[3]) * 100}
			if op.Info().Has(packet.HdrImmDt) || op.Info().Mask&packet.MaskPayload != 0 {
				p.payload = int(data[3]) % 64
			}
			if op == packet.RCAtomicWrite {
				p.payload = 8
			}
			us += int(data[3])
			ps = append(ps, p)
			data = data[4:]
		}
		rep := analyse(build(t, ps), Options{})
		total := 0
		for _, c := range rep.Connections {
			for _, fl := range c.Flows {
				total += fl.Packets
				require.LessOrEqual(t, fl.PSNGaps+fl.PSNRewinds, fl.Packets)
				require.LessOrEqual(t, fl.Messages, fl.Packets)
			}
			trouble := len(c.Recoveries) > 0
			for _, fl := range c.Flows {
				trouble = trouble || fl.PSNGaps > 0 || fl.NAKs.Total() > 0
			}
			if !trouble {
				require.Empty(t, c.Explain)
			}
			for _, ep := range c.Recoveries {
				require.True(t, ep.FirstFrame >= 1 && ep.FirstFrame <= ep.RewindFrame && ep.RewindFrame <= len(ps), "%+v", ep)
				require.GreaterOrEqual(t, ep.LastFrame, ep.RewindFrame)
				require.GreaterOrEqual(t, time.Duration(ep.Duration), time.Duration(0))
			}
		}
		require.Equal(t, len(ps), total)
	})
}
