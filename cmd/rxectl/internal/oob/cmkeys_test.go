package oob

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// capturedCMKey is the client's key message in
// testdata/captures/kernel-rxe_rdmacm_send_4KiB.pcap (frame 31: ib_send_bw
// -R, perftest 6.06, over the first rdma_cm connection).
const capturedCMKey = "00000000 00000001 0000003a 00c1b7b4 00000000 00000000 000055f220169000" +
	" 00000000000000000000ffff0a4d0003 00000000 00000001"

func TestCMKeyMsgCaptured(t *testing.T) {
	raw, err := hex.DecodeString(strings.ReplaceAll(capturedCMKey, " ", ""))
	require.NoError(t, err)
	k, err := ParseCMKeyMsg(raw)
	require.NoError(t, err)
	want := KeyMsg{OutReads: 1, QPN: 0x3a, PSN: 0xc1b7b4, VAddr: 0x55f220169000,
		GID: [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 77, 14: 0, 15: 3}}
	require.Equal(t, want, k)
	require.Equal(t, raw, want.MarshalCM(1))
}

func TestParseCMKeyMsgRejects(t *testing.T) {
	for name, b := range map[string][]byte{
		"short":     make([]byte, CMKeyMsgSize-1),
		"long":      make([]byte, CMKeyMsgSize+8),
		"TCP text":  KeyMsg{QPN: 0x11}.Marshal()[:CMKeyMsgSize],
		"wide LID":  append([]byte{0, 1, 0, 0}, make([]byte, CMKeyMsgSize-4)...),
		"big reads": append([]byte{0, 0, 0, 0, 0, 1, 0, 0}, make([]byte, CMKeyMsgSize-8)...),
	} {
		_, err := ParseCMKeyMsg(b)
		require.Error(t, err, name)
	}
}

// FuzzParseCMKeyMsg: a peer's rdma_cm key message never crashes the
// parser; it is refused exactly when it is not the layout's size or its
// LID or out_reads does not fit 16 bits, with an error saying which; and
// one it accepts, in either layout, is what MarshalCM (or
// MarshalCMTail) makes of the parsed fields and the message's GID index,
// but for the bytes the parser ignores: the alignment, the tail-marker
// address, and the top bytes of the 24-bit QPN and PSN. So every field
// is read from its place, and every field read is written back there.
func FuzzParseCMKeyMsg(f *testing.F) {
	f.Add(KeyMsg{QPN: 0x12, PSN: 0x345678, RKey: 9, VAddr: 1 << 40}.MarshalCM(0))
	f.Add(KeyMsg{QPN: 0x12, PSN: 0x345678, RKey: 9, VAddr: 1 << 40}.MarshalCMTail(0))
	f.Add(KeyMsg{LID: 3, OutReads: 16, QPN: 0x12, PSN: 0x345678, RKey: 9, VAddr: 1 << 40, SRQN: 5,
		GID: [16]byte{10: 0xff, 11: 0xff, 12: 10, 15: 1}}.MarshalCM(2))
	f.Add(KeyMsg{LID: 3, OutReads: 16, QPN: 0x12, PSN: 0x345678, RKey: 9, VAddr: 1 << 40, SRQN: 5,
		GID: [16]byte{10: 0xff, 11: 0xff, 12: 10, 15: 1}}.MarshalCMTail(2))
	// Refused: a LID, then an out_reads, wider than 16 bits (a message
	// in another layout), and a size between the two layouts.
	wide := KeyMsg{QPN: 1}.MarshalCM(0)
	wide[1] = 1
	f.Add(wide)
	wide = KeyMsg{QPN: 1}.MarshalCMTail(0)
	wide[4] = 0x80
	f.Add(wide)
	f.Add(make([]byte, CMKeyMsgSize+4))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, tail := range []bool{false, true} {
			parse, marshal, ignored := ParseCMKeyMsg, KeyMsg.MarshalCM, [][2]int{{20, 24}}
			if tail {
				parse, marshal, ignored = ParseCMKeyMsgTail, KeyMsg.MarshalCMTail, [][2]int{{20, 24}, {32, 40}}
			}
			k, err := parse(b)
			size := CMKeyMsgSize
			if tail {
				size = CMKeyMsgSizeTail
			}
			switch {
			case len(b) != size:
				require.ErrorContains(t, err, fmt.Sprintf("rdma_cm key message of %d bytes, want %d", len(b), size))
				continue
			case binary.BigEndian.Uint32(b) > 0xFFFF || binary.BigEndian.Uint32(b[4:]) > 0xFFFF:
				require.ErrorContains(t, err, "not perftest's layout", "LID and out_reads are 16-bit values in 32-bit fields")
				continue
			}
			require.NoError(t, err, "a message of the right size with 16-bit LID and out_reads")
			want := slices.Clone(b)
			want[8], want[12] = 0, 0 // QPN and PSN are 24 bits
			for _, r := range ignored {
				clear(want[r[0]:r[1]])
			}
			gidIndex := int(int32(binary.BigEndian.Uint32(b[len(b)-4:])))
			require.Equal(t, want, marshal(k, gidIndex), "tail layout %v", tail)
			k2, err := parse(marshal(k, 0))
			require.NoError(t, err)
			require.Equal(t, k, k2)
		}
	})
}

// pipeOf records what a Conn sends and plays the peer's messages.
type pipeOf struct {
	sent [][]byte
	peer [][]byte
}

func (p *pipeOf) Send(b []byte) error { p.sent = append(p.sent, append([]byte(nil), b...)); return nil }

func (p *pipeOf) Recv(b []byte) error {
	if len(p.peer) == 0 {
		return fmt.Errorf("no message from the peer")
	}
	if len(p.peer[0]) != len(b) {
		return fmt.Errorf("a message of %d bytes, want %d", len(p.peer[0]), len(b))
	}
	copy(b, p.peer[0])
	p.peer = p.peer[1:]
	return nil
}

func (p *pipeOf) Finish(bool) error { return nil }
func (p *pipeOf) Close() error      { return nil }

// TestCMKeyMsgByPeerVersion: over rdma_cm, perftest 6.29 and later send
// and read struct pingpong_dest with the 64-bit tail_markers_vaddr after
// vaddr (64 bytes: GID at 40, SRQN at 56, GID index at 60); older
// versions, and rxectl, the 56-byte layout. The key message follows the
// peer's version.
func TestCMKeyMsgByPeerVersion(t *testing.T) {
	my := KeyMsg{OutReads: 16, QPN: 0x3a, PSN: 0xc1b7b4, RKey: 0x1234, VAddr: 0x55f220169000,
		GID: [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 77, 14: 0, 15: 3}}
	rem := KeyMsg{OutReads: 1, QPN: 0x3e, PSN: 0x2a0d2b, RKey: 0x5678, VAddr: 0x7f0011223000,
		GID: [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 77, 14: 0, 15: 2}}
	// perftest 6.29's rdma_write_keys of rem with GID index 1 (and a
	// tail-marker address, which rxectl does not use).
	perftest629, err := hex.DecodeString(strings.ReplaceAll("00000000 00000001 0000003e 002a0d2b 00005678 00000000 00007f0011223000"+
		" 00007f0011224000 00000000000000000000ffff0a4d0002 00000000 00000001", " ", ""))
	require.NoError(t, err)
	require.Len(t, perftest629, 64)

	tests := []struct {
		name    string
		version string
		peerMsg []byte
		size    int
	}{
		{"perftest 6.29", "6.29", perftest629, 64},
		{"perftest 6.30", "6.30", perftest629, 64},
		{"perftest 6.28", "6.28", rem.MarshalCM(1), CMKeyMsgSize},
		{"perftest 6.06", "6.06", rem.MarshalCM(1), CMKeyMsgSize},
		{"rxectl", "6.27\x00rxectl\x12\xb7", rem.MarshalCM(1), CMKeyMsgSize},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &pipeOf{peer: [][]byte{tc.peerMsg}}
			c := NewCMConn(p, true, 1)
			v := make([]byte, VersionMsgSize)
			copy(v, tc.version)
			c.SetPeerVersion(ParseVersionMsg(v))
			got, err := c.Handshake("key", my)
			require.NoError(t, err)
			require.Equal(t, rem, got)
			require.Len(t, p.sent, 1)
			require.Len(t, p.sent[0], tc.size)
			if tc.size == CMKeyMsgSize {
				require.Equal(t, my.MarshalCM(1), p.sent[0])
				return
			}
			// What perftest 6.29's rdma_read_keys takes from it.
			s := p.sent[0]
			be := binary.BigEndian
			require.Equal(t, uint32(16), be.Uint32(s[4:]))
			require.Equal(t, uint32(0x3a), be.Uint32(s[8:]))
			require.Equal(t, uint32(0xc1b7b4), be.Uint32(s[12:]))
			require.Equal(t, uint32(0x1234), be.Uint32(s[16:]))
			require.Equal(t, uint64(0x55f220169000), be.Uint64(s[24:]))
			require.Equal(t, uint64(0), be.Uint64(s[32:]), "no tail markers")
			require.Equal(t, my.GID[:], s[40:56])
			require.Equal(t, uint32(0), be.Uint32(s[56:]))
			require.Equal(t, uint32(1), be.Uint32(s[60:]))
		})
	}
}

// TestParseCMKeyMsg24BitFields: perftest sends the QPN and PSN as 32-bit
// integers, of which the QPN and PSN are the low 24 bits (IBA 9.2); the
// parser keeps those in either layout.
func TestParseCMKeyMsg24BitFields(t *testing.T) {
	for _, tail := range []bool{false, true} {
		b := KeyMsg{QPN: 0xabcdef, PSN: 0x123456}.MarshalCM(0)
		parse := ParseCMKeyMsg
		if tail {
			b, parse = KeyMsg{QPN: 0xabcdef, PSN: 0x123456}.MarshalCMTail(0), ParseCMKeyMsgTail
		}
		b[8], b[12] = 0xFF, 0x01
		k, err := parse(b)
		require.NoError(t, err)
		require.Equal(t, uint32(0xabcdef), k.QPN, "tail layout %v", tail)
		require.Equal(t, uint32(0x123456), k.PSN, "tail layout %v", tail)
	}
}
