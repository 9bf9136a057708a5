package oob

import (
	"encoding/hex"
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

func FuzzParseCMKeyMsg(f *testing.F) {
	f.Add(KeyMsg{QPN: 0x12, PSN: 0x345678, RKey: 9, VAddr: 1 << 40}.MarshalCM(0))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := ParseCMKeyMsg(b)
		if err != nil {
			return
		}
		// Every field we keep survives a round trip.
		k2, err := ParseCMKeyMsg(k.MarshalCM(0))
		require.NoError(t, err)
		require.Equal(t, k, k2)
	})
}
