package dump

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
)

// Little-endian pcapng blocks for tests (draft-ietf-opsawg-pcapng).

// ngSHB is a section header block without options.
func ngSHB() []byte {
	le := binary.LittleEndian
	b := le.AppendUint32(nil, 0x0A0D0D0A)
	b = le.AppendUint32(b, 28)
	b = le.AppendUint32(b, 0x1A2B3C4D)
	b = le.AppendUint16(b, 1)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint64(b, ^uint64(0))
	return le.AppendUint32(b, 28)
}

// ngIDB is an interface description block of link type lt and snap
// length snap (0: unlimited), without options.
func ngIDB(lt uint16, snap uint32) []byte {
	le := binary.LittleEndian
	b := le.AppendUint32(nil, 1)
	b = le.AppendUint32(b, 20)
	b = le.AppendUint16(b, lt)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint32(b, snap)
	return le.AppendUint32(b, 20)
}

// ngSPB is a simple packet block of a packet of origLen bytes on the
// wire, holding data (padded to 4 bytes).
func ngSPB(origLen int, data []byte) []byte {
	le := binary.LittleEndian
	padded := (len(data) + 3) &^ 3
	total := uint32(16 + padded)
	b := le.AppendUint32(nil, 3)
	b = le.AppendUint32(b, total)
	b = le.AppendUint32(b, uint32(origLen))
	b = append(b, data...)
	b = append(b, make([]byte, padded-len(data))...)
	return le.AppendUint32(b, total)
}

// ngEPB is an enhanced packet block of interface iface with the given
// captured and original lengths, holding data (padded to 4 bytes).
func ngEPB(iface uint32, capLen, origLen int, data []byte) []byte {
	le := binary.LittleEndian
	padded := (len(data) + 3) &^ 3
	total := uint32(32 + padded)
	b := le.AppendUint32(nil, 6)
	b = le.AppendUint32(b, total)
	b = le.AppendUint32(b, iface)
	b = le.AppendUint32(b, 0)
	b = le.AppendUint32(b, 0)
	b = le.AppendUint32(b, uint32(capLen))
	b = le.AppendUint32(b, uint32(origLen))
	b = append(b, data...)
	b = append(b, make([]byte, padded-len(data))...)
	return le.AppendUint32(b, total)
}

// TestDumpPcapNgBlocks: a simple packet block holds min(original
// length, snap length of the section's interface 0) bytes (pcapng
// 4.4: the snap length of the first interface of its section, 0 for
// none); a packet block whose captured length runs past its block is
// corrupt; and a packet has the full 16-bit link type of its own
// interface, even where another interface's shares its low byte.
func TestDumpPcapNgBlocks(t *testing.T) {
	frames := readPcap(t, scapyPcap)
	frame := frames[0].data // RC_SEND_FIRST, 256 bytes of payload
	require.Greater(t, len(frame), 100)
	cut := frame[:64]
	sll2 := relinks[4]
	require.Equal(t, "linux SLL2", sll2.name)
	sllFrame := sll2.wrap(frame[14:], binary.BigEndian.Uint16(frame[12:]))
	aligned := frame[:len(frame)&^3]              // a whole number of words
	cutLine := "TRUNCATED by the capture (64 of " // the packet decoded as cut

	tests := []struct {
		name  string
		file  []byte
		code  int
		lines []string // in order, one per frame
		err   string
	}{
		{"SPB cut by interface 0's snap length", cat(ngSHB(), ngIDB(1, 64), ngIDB(1, 0), ngSPB(len(frame), cut)),
			cli.ExitOK, []string{cutLine}, ""},
		{"SPB of a later section, its own interface 0", cat(ngSHB(), ngIDB(1, 0), ngSPB(len(frame), frame),
			ngSHB(), ngIDB(1, 64), ngSPB(len(frame), cut)),
			cli.ExitOK, []string{"ICRC ok", cutLine}, ""},
		{"SPB captured length past its block", cat(ngSHB(), ngIDB(1, 0), ngSPB(len(aligned)+4, aligned)),
			cli.ExitFail, nil, "corrupt pcapng block"},
		{"EPB captured length past its block", cat(ngSHB(), ngIDB(1, 0), ngEPB(0, len(aligned)+4, len(aligned)+4, aligned)),
			cli.ExitFail, nil, "corrupt pcapng block"},
		// 257 shares its low byte with Ethernet's 1, all pcapgo reports.
		{"Ethernet and link type 257", cat(ngSHB(), ngIDB(1, 0), ngIDB(257, 0), ngEPB(1, len(frame), len(frame), frame),
			ngEPB(0, len(frame), len(frame), frame)),
			cli.ExitOK, []string{"    2 "}, "skipping frames of unsupported link type 257 (first: frame 1)"},
		{"SLL2 and link type 20", cat(ngSHB(), ngIDB(20, 0), ngIDB(276, 0), ngEPB(1, len(sllFrame), len(sllFrame), sllFrame)),
			cli.ExitOK, []string{"    1 0.000000 192.168.10.1:49374 → 192.168.10.2:4791 RC_SEND_FIRST"}, ""},
		{"two SLL2 interfaces", cat(ngSHB(), ngIDB(276, 0), ngIDB(276, 0), ngEPB(1, len(sllFrame), len(sllFrame), sllFrame)),
			cli.ExitOK, []string{"RC_SEND_FIRST qp=0x000011 psn=16777214 payload=256 ICRC ok"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := runCmd(t, "dump", writeFile(t, "blocks.pcapng", tc.file))
			require.Equal(t, tc.code, code, errs)
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if tc.lines == nil {
				require.Equal(t, "", out)
			} else {
				require.Len(t, lines, len(tc.lines), out)
				for i, want := range tc.lines {
					require.Contains(t, lines[i], want)
				}
			}
			if tc.err != "" {
				require.Contains(t, errs, tc.err)
			}
		})
	}
}

// ngFile is a pcapng file in byte order o: a section header, an
// interface of link type lt, and one enhanced packet block per frame.
func ngFile(o binary.AppendByteOrder, lt uint16, frames ...[]byte) []byte {
	b := o.AppendUint32(nil, 0x0A0D0D0A)
	b = o.AppendUint32(b, 28)
	b = o.AppendUint32(b, 0x1A2B3C4D)
	b = o.AppendUint16(b, 1)
	b = o.AppendUint16(b, 0)
	b = o.AppendUint64(b, ^uint64(0))
	b = o.AppendUint32(b, 28)
	b = o.AppendUint32(b, 1)
	b = o.AppendUint32(b, 20)
	b = o.AppendUint16(b, lt)
	b = o.AppendUint16(b, 0)
	b = o.AppendUint32(b, 0)
	b = o.AppendUint32(b, 20)
	for _, data := range frames {
		padded := (len(data) + 3) &^ 3
		total := uint32(32 + padded)
		b = o.AppendUint32(b, 6)
		b = o.AppendUint32(b, total)
		b = o.AppendUint32(b, 0)
		b = o.AppendUint32(b, 0)
		b = o.AppendUint32(b, 0)
		b = o.AppendUint32(b, uint32(len(data)))
		b = o.AppendUint32(b, uint32(len(data)))
		b = append(b, data...)
		b = append(b, make([]byte, padded-len(data))...)
		b = o.AppendUint32(b, total)
	}
	return b
}

// TestDumpPcapNgByteOrder: a pcapng section is in the byte order its
// byte-order magic gives (1a2b3c4d read in the writer's order): a
// big-endian file reads as the little-endian one does.
func TestDumpPcapNgByteOrder(t *testing.T) {
	frames := readPcap(t, scapyPcap)[:3]
	var data [][]byte
	for _, f := range frames {
		data = append(data, f.data)
	}
	le, errLE, code := runCmd(t, "dump", writeFile(t, "le.pcapng", ngFile(binary.LittleEndian, 1, data...)))
	require.Equal(t, cli.ExitOK, code, errLE)
	require.Equal(t, 3, strings.Count(le, "ICRC ok\n"))
	be, errBE, code := runCmd(t, "dump", writeFile(t, "be.pcapng", ngFile(binary.BigEndian, 1, data...)))
	require.Equal(t, cli.ExitOK, code, errBE)
	require.Equal(t, le, be)
	require.Equal(t, errLE, errBE)
}
