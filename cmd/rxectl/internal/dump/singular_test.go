package dump

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/packet"
)

// TestSummarySingular: dump's summary on stderr writes counts of one in
// the singular: one frame, one RoCEv2 packet, and with --strict the one
// packet the capture cut short; two frames in the plural.
func TestSummarySingular(t *testing.T) {
	frame := writeFirst(t, 256)
	cut := capFrame{data: frame[:roceOff+40], ci: ciLen(len(frame))}
	whole := capFrame{data: frame, ci: ciLen(len(frame))}
	tests := []struct {
		name   string
		frames []capFrame
		want   string
	}{
		{"one cut", []capFrame{cut}, "rxectl dump: 1 frame, 1 RoCEv2 packet, 0 bad ICRC, 0 malformed, 1 truncated by the capture (snap length)\n" +
			"rxectl dump: --strict: the ICRC and payload of 1 packet truncated by the capture could not be verified (not counted as failures)\n"},
		{"two, one cut", []capFrame{whole, cut}, "rxectl dump: 2 frames, 2 RoCEv2 packets, 0 bad ICRC, 0 malformed, 1 truncated by the capture (snap length)\n" +
			"rxectl dump: --strict: the ICRC and payload of 1 packet truncated by the capture could not be verified (not counted as failures)\n"},
		{"two cut", []capFrame{cut, cut}, "rxectl dump: 2 frames, 2 RoCEv2 packets, 0 bad ICRC, 0 malformed, 2 truncated by the capture (snap length)\n" +
			"rxectl dump: --strict: the ICRC and payload of 2 packets truncated by the capture could not be verified (not counted as failures)\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			file := writeFile(t, "cut.pcap", pcapBytes(1, tc.frames))
			_, stderr, code := runCmd(t, "dump", "--strict", file)
			require.Equal(t, cli.ExitOK, code, stderr)
			require.Equal(t, tc.want, stderr)
		})
	}
}

// TestMalformedLengthSingular: the length of a malformed datagram's UDP
// payload reads "1 byte" for one byte.
func TestMalformedLengthSingular(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{{0, " (0 bytes)"}, {1, " (1 byte)"}, {2, " (2 bytes)"}} {
		f := Frame{Err: errors.New("bad"), Datagram: packet.IPDatagram{UDPHeader: make([]byte, 8), Payload: make([]byte, tc.n)}}
		require.Equal(t, " MALFORMED: bad"+tc.want+"\n", string(appendMalformed(nil, &f, false)))
	}
}
