package dump

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"time"

	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/gorxe/gorxe/packet"
)

// maxSnaplen bounds the length of one record of a pcap or pcapng file, like
// tcpdump's MAXIMUM_SNAPLEN: a corrupt record length must not make pcapgo
// allocate gigabytes.
const maxSnaplen = 262144

// File magics, read little-endian from the first four bytes of a file.
const (
	magicPcapNgSHB = 0x0A0D0D0A // pcapng section header block (either byte order)
	magicPcapUsLE  = 0xA1B2C3D4 // classic pcap, microseconds, little-endian file
	magicPcapUsBE  = 0xD4C3B2A1 // classic pcap, microseconds, big-endian file
	magicPcapNsLE  = 0xA1B23C4D // classic pcap, nanoseconds, little-endian file
	magicPcapNsBE  = 0x4D3CB2A1 // classic pcap, nanoseconds, big-endian file
	gzipMagic0     = 0x1F
	gzipMagic1     = 0x8B
)

// errNotCaptureFmt is the message for a file of unknown format.
const errNotCaptureFmt = "not a pcap or pcapng capture (starts with %s)"

// LinkType is a pcap LINKTYPE_ value, 16 bits wide: gopacket v1.1.19's
// layers.LinkType is a uint8, which turns LINUX_SLL2 (276) into 20, so
// rxectl reads link types itself.
type LinkType = packet.LinkType

// Record is one frame read from a capture. Data is only valid until the
// next call to Capture.Next.
type Record struct {
	Data     []byte
	TS       time.Time
	CapLen   int // bytes captured (len(Data))
	OrigLen  int // length on the wire
	LinkType LinkType
}

// Capture reads the frames of a pcap or pcapng file.
type Capture struct {
	// LinkType is the link type of a classic pcap file; a pcapng file
	// gives one per record.
	LinkType LinkType
	pcap     *pcapgo.Reader
	ng       *pcapgo.NgReader
	ngGuard  *ngGuard
}

// ErrTruncated reports a capture file that ends in the middle of a record.
var ErrTruncated = errors.New("capture file ends in the middle of a record")

// Open detects the format of r from its magic (classic pcap in either
// byte order and time resolution, pcapng, either of them gzip-compressed) and
// reads the file header.
func Open(r io.Reader) (c *Capture, err error) {
	defer func() {
		if p := recover(); p != nil { // a reader bug on corrupt input
			c, err = nil, fmt.Errorf("corrupt capture file header (%v)", p)
		}
	}()
	br := bufio.NewReaderSize(r, 64<<10)
	magic, err := br.Peek(4)
	if err != nil {
		if len(magic) == 0 {
			return nil, errors.New("empty file, not a capture")
		}
		return nil, fmt.Errorf(errNotCaptureFmt, quoteMagic(magic))
	}
	c = &Capture{}
	if magic[0] == gzipMagic0 && magic[1] == gzipMagic1 {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		br = bufio.NewReaderSize(zr, 64<<10)
		if magic, err = br.Peek(4); err != nil {
			if len(magic) == 0 {
				return nil, fmt.Errorf("gzip-compressed, but the content is empty or unreadable (%w)", err)
			}
			return nil, fmt.Errorf("gzip-compressed, but the content is "+errNotCaptureFmt, quoteMagic(magic))
		}
	}
	switch binary.LittleEndian.Uint32(magic) {
	case magicPcapNgSHB:
		c.ngGuard = &ngGuard{r: br}
		c.ng, err = pcapgo.NewNgReader(c.ngGuard, pcapgo.NgReaderOptions{WantMixedLinkType: true})
		if err != nil {
			return nil, fmt.Errorf("reading pcapng section header: %w", unexpected(err))
		}
	case magicPcapUsLE, magicPcapUsBE, magicPcapNsLE, magicPcapNsBE:
		hdr, err := br.Peek(pcapFileHeaderLen)
		if err != nil {
			return nil, fmt.Errorf("reading pcap file header: %w", unexpected(err))
		}
		c.LinkType = pcapLinkType(hdr) // before pcapgo reads: Peek's bytes do not last
		c.pcap, err = pcapgo.NewReader(&pcapGuard{r: br, order: pcapOrder(hdr), skip: pcapFileHeaderLen})
		if err != nil {
			return nil, fmt.Errorf("reading pcap file header: %w", unexpected(err))
		}
		c.pcap.SetSnaplen(maxSnaplen)
	default:
		return nil, fmt.Errorf(errNotCaptureFmt, quoteMagic(magic))
	}
	return c, nil
}

// pcapFileHeaderLen is the length of a classic pcap file header.
const pcapFileHeaderLen = 24

// pcapOrder returns the byte order of a classic pcap file from its magic.
func pcapOrder(hdr []byte) binary.ByteOrder {
	if m := binary.LittleEndian.Uint32(hdr); m == magicPcapUsLE || m == magicPcapNsLE {
		return binary.LittleEndian
	}
	return binary.BigEndian
}

// pcapLinkType reads the link type of a classic pcap file header: the low
// 16 bits of its last word (the high bits carry FCS information).
func pcapLinkType(hdr []byte) LinkType {
	return LinkType(pcapOrder(hdr).Uint32(hdr[20:24]) & 0xFFFF)
}

// pcapRecordHeaderLen is the length of a classic pcap record header:
// seconds, fraction, captured length, original length.
const pcapRecordHeaderLen = 16

// pcapGuard passes a classic pcap stream on to pcapgo's Reader record by
// record, raising the original length of a record to its captured length
// where the file gives less. Wireshark reads such a record (a writer's
// slip); pcapgo v1.1.19 refuses it after reading its header, and then
// cannot go on, so one such record ended the dump of the whole file.
type pcapGuard struct {
	r     io.Reader
	order binary.ByteOrder
	skip  int // bytes of the file header still to pass unchanged
	hdr   [pcapRecordHeaderLen]byte
	nhdr  int   // bytes of hdr read
	out   int   // bytes of hdr handed on
	rest  int64 // bytes of the current record's data still to pass
	err   error // sticky, after a short record header
}

// Read passes the stream through.
func (g *pcapGuard) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	switch {
	case g.skip > 0:
		n, err := g.r.Read(p[:min(len(p), g.skip)])
		g.skip -= n
		return n, err
	case g.out < g.nhdr: // hand on the (checked) header
		n := copy(p, g.hdr[g.out:g.nhdr])
		if g.out += n; g.out == pcapRecordHeaderLen {
			g.nhdr, g.out = 0, 0
		}
		return n, nil
	case g.rest > 0:
		n, err := g.r.Read(p[:min(int64(len(p)), g.rest)])
		g.rest -= int64(n)
		if err == io.EOF && g.rest > 0 {
			// The file ends inside the record's data. Passed on as is,
			// io.EOF with not one byte of the data read is what pcapgo's
			// io.ReadFull calls a clean end: the record was dropped
			// without a word and the dump exited 0.
			err = io.ErrUnexpectedEOF
		}
		return n, err
	case g.err != nil:
		return 0, g.err
	}
	n, err := io.ReadFull(g.r, g.hdr[:])
	if err != nil {
		if n == 0 {
			return 0, err // io.EOF between records
		}
		// A short header: hand on what there is, then the end.
		g.nhdr, g.err = n, io.EOF
		return g.Read(p)
	}
	caplen, origlen := g.order.Uint32(g.hdr[8:]), g.order.Uint32(g.hdr[12:])
	if caplen > origlen {
		g.order.PutUint32(g.hdr[12:], caplen)
	}
	g.nhdr, g.rest = n, int64(caplen)
	return g.Read(p)
}

// quoteMagic shows the first bytes of a file.
func quoteMagic(b []byte) string {
	return fmt.Sprintf("% x", b)
}

// unexpected turns the io.EOF of a short header into io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// next returns the next record; io.EOF at the clean end of the file,
// ErrTruncated (wrapped) when the file stops inside a record.
func (c *Capture) Next() (rec Record, err error) {
	defer func() {
		if p := recover(); p != nil { // a reader bug on corrupt input
			rec, err = Record{}, fmt.Errorf("corrupt capture record (%v)", p)
		}
	}()
	if c.pcap != nil {
		data, ci, err := c.pcap.ZeroCopyReadPacketData()
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return rec, ErrTruncated
			}
			return rec, err
		}
		return Record{Data: data, TS: ci.Timestamp, CapLen: len(data), OrigLen: ci.Length, LinkType: c.LinkType}, nil
	}
	data, ci, err := c.ng.ZeroCopyReadPacketData()
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return rec, ErrTruncated
		}
		return rec, err
	}
	ts := ci.Timestamp
	st := c.ngGuard.stamp()
	if iface, err := c.ng.Interface(ci.InterfaceIndex); err == nil && iface.TimestampResolution.Binary() && st.ok {
		// gopacket (v1.1.19) scales a binary fraction of 2^-e s to
		// nanoseconds by floor(1e9 / 2^e) below 2^-30, which is off by
		// up to 0.07 % of a second (0.7 ms at 2^-20), and divides it by
		// floor(2^e / 1e9) from 2^-30 on, off by up to 7 % (and carried
		// into the next second). The block's own time stamp is scaled
		// here instead, as tshark does: whole seconds, then the fraction
		// times 1e9 / 2^e, truncated.
		if e := iface.TimestampResolution.Exponent(); e > 0 && e < 64 {
			hi, lo := bits.Mul64(st.units&(uint64(1)<<e-1), 1e9)
			ns := hi<<(64-e) | lo>>e
			ts = time.Unix(int64(st.units>>e+iface.TimestampOffset), int64(ns)).UTC()
		}
	}
	lt := packet.LinkEthernet
	if st.linkOK {
		// The packet's own interface's link type, all 16 bits: pcapgo's
		// is the low byte only, which two interfaces may share.
		lt = st.link
	} else if len(ci.AncillaryData) > 0 {
		if t, ok := ci.AncillaryData[0].(layers.LinkType); ok {
			lt = c.ngGuard.full(t)
		}
	}
	return Record{Data: data, TS: ts, CapLen: len(data), OrigLen: ci.Length, LinkType: lt}, nil
}
