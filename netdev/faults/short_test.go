package faults_test

import (
	"bytes"
	"fmt"
	"math/bits"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/faults"
	"github.com/gorxe/gorxe/packet"
)

// raw returns a datagram of n bytes whose first byte (a BTH's opcode, if
// it is long enough for one) is op and whose other bytes are tag.
func raw(n int, op, tag byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = tag
	}
	if n > 0 {
		b[0] = op
	}
	return b
}

// sendAll sends each datagram through a Conn wrapped with rules around a
// recorder, one WriteBatch each, and returns what reached the recorder.
func sendAll(t *testing.T, rules []faults.Rule, dgrams [][]byte) [][]byte {
	t.Helper()
	r := &recorder{}
	c := faults.Wrap(r, faults.Config{Seed: 9, Rules: rules})
	for _, d := range dgrams {
		n, err := c.WriteBatch([]netdev.Message{{Buf: d, N: len(d), Addr: netdev.DefaultPipeAddrB}})
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}
	return r.got
}

// TestOpcodeFilterAllOpcodes: an opcode filter keeps to its opcodes in
// every range of the BTH opcode byte (RC 0x00, UC 0x20, RD 0x40, UD 0x60,
// CNP 0x81, and the top of the byte).
func TestOpcodeFilterAllOpcodes(t *testing.T) {
	ops := []byte{byte(packet.RCSendOnly), byte(packet.UCSendOnly), 0x44, byte(packet.UDSendOnly),
		0x81, 0xC4, 0xFF}
	for k, op := range ops {
		t.Run(packet.Opcode(op).String(), func(t *testing.T) {
			var dgrams [][]byte
			for j, other := range ops {
				dgrams = append(dgrams, raw(40, other, byte(j)))
			}
			got := sendAll(t, mustRules(t, fmt.Sprintf("drop=1,dir=send,op=0x%02x", op)), dgrams)
			var left []byte
			for _, b := range got {
				left = append(left, b[0])
			}
			want := append(append([]byte(nil), ops[:k]...), ops[k+1:]...)
			require.Equal(t, want, left)
		})
	}
}

// TestShortDatagrams: a datagram shorter than a BTH matches only a rule
// without opcodes, whatever its first byte; Corrupt flips exactly one bit
// of every datagram that has one, after the BTH of one that can hold a
// BTH and an ICRC (16 bytes or more) and anywhere in a shorter one, and
// passes an empty one as it is.
func TestShortDatagrams(t *testing.T) {
	op := byte(packet.RCSendOnly)
	t.Run("trace", func(t *testing.T) {
		var tr tracer
		c := faults.Wrap(&recorder{}, faults.Config{Trace: tr.hook, Rules: mustRules(t, "drop=1,dir=send")})
		for _, d := range [][]byte{raw(5, op, 0xFF), raw(packet.BTHSize-1, op, 0xFF)} {
			_, err := c.WriteBatch([]netdev.Message{{Buf: d, N: len(d), Addr: netdev.DefaultPipeAddrB}})
			require.NoError(t, err)
		}
		require.Equal(t, []event{{faults.Send, faults.Drop, 0, 0}, {faults.Send, faults.Drop, 0, 0}}, tr.get(),
			"no BTH: opcode and PSN zero")
	})
	t.Run("opcode filter", func(t *testing.T) {
		dgrams := [][]byte{raw(1, op, 1), raw(packet.BTHSize-1, op, 2), raw(packet.BTHSize, op, 3)}
		got := sendAll(t, mustRules(t, "drop=1,dir=send,op=RC_SEND_ONLY"), dgrams)
		require.Equal(t, dgrams[:2], got, "only the one with a BTH is dropped")
	})
	t.Run("corrupt", func(t *testing.T) {
		const copies = 64
		for _, n := range []int{0, 1, 11, 12, 15, 16, 17, 40} {
			var dgrams [][]byte
			for range copies {
				dgrams = append(dgrams, raw(n, op, 0x5A))
			}
			got := sendAll(t, mustRules(t, "corrupt=1,dir=send"), dgrams)
			require.Len(t, got, copies)
			start := 0
			if n >= packet.BTHSize+packet.ICRCSize {
				start = packet.BTHSize
			}
			for _, b := range got {
				orig := raw(n, op, 0x5A)
				require.Len(t, b, n)
				require.True(t, bytes.Equal(orig[:start], b[:start]), "%d bytes: the BTH is never touched", n)
				flipped := 0
				for i := range b {
					flipped += bits.OnesCount8(b[i] ^ orig[i])
				}
				if n == 0 {
					require.Zero(t, flipped)
				} else {
					require.Equal(t, 1, flipped, "%d bytes: one bit", n)
				}
			}
		}
	})
}

// TestCorruptReachesEveryBit: Corrupt picks its bit among all those after
// the BTH, up to the ICRC's last: over 4000 corruptions of a 24-byte
// datagram each of its 96 bits there is flipped at least once (a uniform
// pick misses one with probability below 10^-15).
func TestCorruptReachesEveryBit(t *testing.T) {
	const n, copies = packet.BTHSize + 12, 4000
	var dgrams [][]byte
	for range copies {
		dgrams = append(dgrams, raw(n, byte(packet.RCSendOnly), 0))
	}
	seen := make([]bool, n*8)
	for _, b := range sendAll(t, mustRules(t, "corrupt=1,dir=send"), dgrams) {
		for i := packet.BTHSize; i < n; i++ {
			for k := range 8 {
				if b[i]&(1<<k) != 0 {
					seen[i*8+k] = true
				}
			}
		}
	}
	for bit := packet.BTHSize * 8; bit < n*8; bit++ {
		require.True(t, seen[bit], "byte %d bit %d never flipped", bit/8, bit%8)
	}
}
