package packet

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

type vector struct {
	name string
	ip   []byte
}

func loadVectors(t testing.TB) []vector {
	t.Helper()
	f, err := os.Open("../testdata/golden/icrc_vectors.txt")
	require.NoError(t, err)
	defer f.Close()
	var vs []vector
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		b, err := hex.DecodeString(strings.Join(fields[1:], ""))
		require.NoError(t, err, fields[0])
		vs = append(vs, vector{fields[0], b})
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, vs)
	return vs
}

// readPcap returns the frames of a classic little- or big-endian pcap file
// with an Ethernet link type. It is a tiny reader so that this package's
// tests need nothing but the standard library and testify.
func readPcap(t testing.TB, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(b), 24)
	var bo binary.ByteOrder
	switch binary.LittleEndian.Uint32(b) {
	case 0xa1b2c3d4, 0xa1b23c4d:
		bo = binary.LittleEndian
	case 0xd4c3b2a1, 0x4d3cb2a1:
		bo = binary.BigEndian
	default:
		t.Fatalf("%s: not a classic pcap", path)
	}
	require.Equal(t, uint32(1), bo.Uint32(b[20:]), "link type Ethernet")
	var frames [][]byte
	for off := 24; off < len(b); {
		require.LessOrEqual(t, off+16, len(b))
		n := int(bo.Uint32(b[off+8:]))
		off += 16
		require.LessOrEqual(t, off+n, len(b))
		frames = append(frames, b[off:off+n])
		off += n
	}
	return frames
}

// etherIP returns the IP packet inside an Ethernet frame (skipping 802.1Q
// tags), or nil.
func etherIP(f []byte) []byte {
	if len(f) < 14 {
		return nil
	}
	et, off := binary.BigEndian.Uint16(f[12:]), 14
	for et == 0x8100 && len(f) >= off+4 {
		et, off = binary.BigEndian.Uint16(f[off+2:]), off+4
	}
	if et != 0x0800 && et != 0x86DD {
		return nil
	}
	return f[off:]
}
