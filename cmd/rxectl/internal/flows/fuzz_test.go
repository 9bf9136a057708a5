package flows

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// FuzzAnalyze feeds packet sequences made from the fuzzer's bytes (five
// bytes a packet: direction and opcode, PSN low bits, syndrome, length,
// time step) to the analysis. The time step (timeStep) moves time forwards
// or backwards by microseconds, milliseconds or hours. An opcode this
// package does not know (0x15, 0x18-0x1b, 0x1e, 0x1f) gives a packet with a
// bad ICRC and the opcode 16 below it. Properties: it never panics; every
// packet with a good ICRC is counted once in one flow, and every one with a
// bad ICRC once, in one flow or in the report (BadICRCNoFlow); the PSNs
// counted corrupted are at most the PSNs missing and the flow's bad-ICRC
// packets; a packet opens a gap,
// goes back (rewind) or comes late at most once, so gaps, rewinds and late
// arrivals together never exceed the packets, nor do messages; a flow's
// gaps miss at least one PSN each, and FirstGapFrame is set exactly when
// one stands; the goodput counts the payload of each request PSN and each
// READ response PSN of a direction once, however the packets are
// classified (in order, late, resent); every recovery episode lies within the
// capture, in frame order, and no duration is negative; the goodput has at
// most 20 intervals and the report's size is linear in the packets, however
// the times jump; the explanation is empty exactly when nothing went wrong.
func FuzzAnalyze(f *testing.F) {
	f.Add([]byte{0x04, 0, 0, 1, 1, 0x84, 1, 0x1f, 1, 1, 0x04, 3, 0, 1, 1, 0x84, 3, 0x60, 1, 1})
	f.Add([]byte{0x0c, 0, 0, 1, 1, 0x8d, 0, 0x1f, 1, 1, 0x8e, 1, 0, 1, 1, 0x8f, 3, 0x1f, 1, 1, 0x0c, 2, 0, 50, 50})
	// The third SEND is stamped 2 ms before the first.
	f.Add([]byte{0x04, 0, 0, 40, 1, 0x04, 1, 0, 40, 0x81, 0x04, 2, 0, 40, 0})
	// The second SEND is stamped an hour after the first and third.
	f.Add([]byte{0x04, 0, 0, 40, 0xe0, 0x04, 1, 0, 40, 0xc0, 0x04, 2, 0, 40, 0})
	// Selective repeat: SEND FIRST 100, LAST 102 and ONLY 106 twice held
	// behind the hole at 101, a hole report (syndrome 0x70), 101 resent.
	f.Add([]byte{0x00, 100, 0, 10, 1, 0x02, 102, 0, 10, 1, 0x04, 106, 0, 10, 1, 0x04, 106, 0, 10, 1,
		0x91, 101, 0x70, 0, 1, 0x01, 101, 0, 10, 1})
	// Selective-repeat READs: READs 10..13 and 14..17 (PMTU 50 from the
	// FIRST payloads), response 12 lost, a one-packet re-read of 12, a new
	// READ at the frontier (18), the re-read's answer and READ 18's.
	f.Add([]byte{0x0c, 10, 0, 2, 1, 0x0c, 14, 0, 2, 1,
		0x8d, 10, 0x1f, 50, 1, 0x8e, 11, 0, 50, 1, 0x8f, 13, 0x1f, 50, 1,
		0x8d, 14, 0x1f, 50, 1, 0x8e, 15, 0, 50, 1, 0x8e, 16, 0, 50, 1, 0x8f, 17, 0x1f, 50, 1,
		0x0c, 12, 0, 0, 1, 0x0c, 18, 0, 1, 1,
		0x90, 12, 0x1f, 50, 1, 0x8d, 18, 0x1f, 50, 1, 0x8f, 19, 0x1f, 50, 1})
	// READ 10..13 (PMTU 50): responses 10, 12, 11 (late), a duplicate of
	// 12, 13; READ 14..17 loses 15, is re-read from 15 and answered again.
	f.Add([]byte{0x0c, 10, 0, 2, 1, 0x0c, 14, 0, 2, 1,
		0x8d, 10, 0x1f, 50, 1, 0x8e, 12, 0, 50, 1, 0x8e, 11, 0, 50, 1, 0x8e, 12, 0, 50, 1, 0x8f, 13, 0x1f, 50, 1,
		0x8d, 14, 0x1f, 50, 1, 0x8e, 16, 0, 50, 1, 0x8f, 17, 0x1f, 50, 1,
		0x0c, 15, 0, 1, 1, 0x8d, 15, 0x1f, 50, 1, 0x8f, 17, 0x1f, 50, 1})
	// SEND ONLY 10, SEND ONLY WITH IMMEDIATE 11 with a bad ICRC (0x15),
	// SEND ONLY 12 (a gap the bad packet carried), an ACK of 12.
	f.Add([]byte{0x04, 10, 0, 10, 1, 0x15, 11, 0, 10, 1, 0x04, 12, 0, 10, 1, 0x84, 12, 0x1f, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		var ps []pk
		us := 0
		for len(data) >= 5 {
			op := packet.Opcode(data[0] & 0x1f)
			bad := !op.Valid()
			if bad {
				op -= 16
			}
			p := pk{us: us, fromB: data[0]&0x80 != 0, op: op, psn: uint32(data[1]) | uint32(binary.BigEndian.Uint16([]byte{0, data[0] & 0x60}))<<8,
				syn: packet.Syndrome(data[2] & 0x7f), ackReq: data[2]&0x80 != 0, dmaLen: uint32(data[3]) * 100, bad: bad}
			if op.Info().Has(packet.HdrImmDt) || op.Info().Mask&packet.MaskPayload != 0 {
				p.payload = int(data[3]) % 64
			}
			if op == packet.RCAtomicWrite {
				p.payload = 8
			}
			us += timeStep(data[4])
			ps = append(ps, p)
			data = data[5:]
		}
		pkts := build(t, ps)
		rep := analyse(pkts, Options{})
		// The payload of each PSN of a direction's requests, and of its
		// READ responses, counted once.
		type psnKey struct {
			fromB, resp bool
			psn         packet.PSN
		}
		once := map[psnKey]bool{}
		wantGoodput := 0
		for i, p := range pkts {
			k := psnKey{fromB: ps[i].fromB, psn: p.Pkt.PSN()}
			switch {
			case p.BadICRC:
				continue
			case p.Pkt.Mask()&packet.MaskReq != 0:
			case isReadResponse(p.Pkt.Opcode()):
				k.resp = true
			default:
				continue
			}
			if !once[k] {
				once[k] = true
				wantGoodput += p.Pkt.PayloadLen()
			}
		}
		// The checks of each flow and episode call require only when
		// they fail: its t.Helper walks the stack on every call, which
		// cost a fifth of a run.
		total, goodput, bad := 0, 0, rep.BadICRCNoFlow
		for _, c := range rep.Connections {
			for _, fl := range c.Flows {
				total += fl.Packets
				bad += fl.BadICRC
				if fl.PSNCorrupt > fl.PSNMissing || fl.PSNCorrupt > fl.BadICRC || len(fl.BadICRCFrames) > fl.BadICRC ||
					fl.PSNGaps+fl.PSNRewinds+fl.PSNLate > fl.Packets || fl.Messages > fl.Packets ||
					fl.PSNGaps < 0 || fl.PSNGaps > fl.PSNMissing || (fl.PSNGaps == 0) != (fl.FirstGapFrame == 0) {
					require.LessOrEqual(t, fl.PSNCorrupt, fl.PSNMissing, "%+v", fl)
					require.LessOrEqual(t, fl.PSNCorrupt, fl.BadICRC, "%+v", fl)
					require.LessOrEqual(t, len(fl.BadICRCFrames), fl.BadICRC, "%+v", fl)
					require.LessOrEqual(t, fl.PSNGaps+fl.PSNRewinds+fl.PSNLate, fl.Packets, "%+v", fl)
					require.LessOrEqual(t, fl.Messages, fl.Packets)
					require.GreaterOrEqual(t, fl.PSNGaps, 0, "%+v", fl)
					require.LessOrEqual(t, fl.PSNGaps, fl.PSNMissing, "%+v", fl)
					require.Equal(t, fl.PSNGaps == 0, fl.FirstGapFrame == 0, "%+v", fl)
				}
			}
			for _, iv := range c.Goodput {
				goodput += iv.Bytes
			}
			trouble := len(c.Recoveries) > 0
			for _, fl := range c.Flows {
				trouble = trouble || fl.PSNGaps > 0 || fl.NAKs.Total() > 0
			}
			if !trouble {
				require.Empty(t, c.Explain)
			}
			for _, ep := range c.Recoveries {
				if !(ep.FirstFrame >= 1 && ep.FirstFrame <= ep.RewindFrame && ep.RewindFrame <= len(ps)) ||
					ep.LastFrame < ep.RewindFrame || ep.Duration < 0 || ep.Silence < 0 {
					require.True(t, ep.FirstFrame >= 1 && ep.FirstFrame <= ep.RewindFrame && ep.RewindFrame <= len(ps), "%+v", ep)
					require.GreaterOrEqual(t, ep.LastFrame, ep.RewindFrame)
					require.GreaterOrEqual(t, time.Duration(ep.Duration), time.Duration(0))
					require.GreaterOrEqual(t, time.Duration(ep.Silence), time.Duration(0))
				}
			}
			require.GreaterOrEqual(t, time.Duration(c.RTT.Min), time.Duration(0))
			require.LessOrEqual(t, len(c.Goodput), 20)
		}
		wantBad := 0
		for _, p := range pkts {
			if p.BadICRC {
				wantBad++
			}
		}
		require.Equal(t, len(ps)-wantBad, total)
		require.Equal(t, wantBad, bad, "every packet with a bad ICRC counted once")
		require.LessOrEqual(t, len(rep.BadICRCNoFlowFrames), rep.BadICRCNoFlow)
		require.Equal(t, wantGoodput, goodput)
		requireSmallReport(t, rep, len(ps), 20)
	})
}

// timeStep is the time step, in microseconds, that FuzzAnalyze reads from
// b: 0x00-0x7f forwards b µs; then, n being the low five bits plus one,
// 0x80-0x9f backwards n ms, 0xa0-0xbf forwards n ms, 0xc0-0xdf backwards
// n hours, 0xe0-0xff forwards n hours.
func timeStep(b byte) int {
	const ms, hour = 1000, 3_600_000_000
	n := int(b&0x1f) + 1
	switch b >> 5 {
	case 0, 1, 2, 3:
		return int(b)
	case 4:
		return -n * ms
	case 5:
		return n * ms
	case 6:
		return -n * hour
	}
	return n * hour
}
