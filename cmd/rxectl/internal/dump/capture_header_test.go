package dump

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/internal/syncbuf"
)

// TestDumpCaptureHeaders: what the first bytes and the file header of a
// capture decide. Only both gzip magic bytes (RFC 1952: 1f 8b) make a
// file gzip; the link type of a classic pcap file is the low 16 bits of
// its last header word, whose upper bits carry FCS information; a record
// of maxSnaplen captured bytes (tcpdump's MAXIMUM_SNAPLEN) is read,
// whatever snap length the file header gives.
func TestDumpCaptureHeaders(t *testing.T) {
	frames := readPcap(t, scapyPcap)
	first := frames[:1]
	want, _, code := runCmd(t, "dump", writeFile(t, "first.pcap", pcapBytes(1, first)))
	require.Equal(t, cli.ExitOK, code)
	require.Contains(t, want, "ICRC ok")
	big := capFrame{data: append(bytes.Clone(first[0].data), make([]byte, maxSnaplen-len(first[0].data))...), ci: first[0].ci}

	tests := []struct {
		name   string
		file   []byte
		code   int
		stdout string
		stderr string
	}{
		{"1f without 8b", append([]byte{0x1f, 0x00, 0x00, 0x00}, make([]byte, 40)...), cli.ExitFail, "",
			"not a pcap or pcapng capture (starts with 1f 00 00 00)"},
		{"link type word with FCS bits", pcapBytes(0x1000_0001, first), cli.ExitOK, want, ""},
		{"record of maxSnaplen bytes", pcapBytes(1, []capFrame{big}), cli.ExitOK, want, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := runCmd(t, "dump", writeFile(t, "capture", tc.file))
			require.Equal(t, tc.code, code, errs)
			require.Equal(t, tc.stdout, out)
			require.Contains(t, errs, tc.stderr)
		})
	}
}

// TestDumpStdinIsLive: reading standard input (tcpdump -w - | rxectl dump
// -), each frame's line is written as soon as the frame is read, not when
// the output buffer fills or the input ends.
func TestDumpStdinIsLive(t *testing.T) {
	file := pcapBytes(1, readPcap(t, scapyPcap)[:1])
	pr, pw := io.Pipe()
	var out, errs syncbuf.Buffer
	done := make(chan int, 1)
	go func() { done <- Run([]string{"-"}, pr, &out, &errs) }()
	_, err := pw.Write(file)
	require.NoError(t, err)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "ICRC ok\n") {
		require.True(t, time.Now().Before(deadline), "no line for the frame read while the input is open: %q", out.String())
		time.Sleep(time.Millisecond)
	}
	require.NoError(t, pw.Close())
	require.Equal(t, cli.ExitOK, <-done, errs.String())
}
