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
	pcap     *pcapReader
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
	br := bufio.NewReaderSize(r, readBufSize(r))
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
		c.LinkType = pcapLinkType(hdr) // before reading on: Peek's bytes do not last
		c.pcap, err = newPcapReader(br)
		if err != nil {
			return nil, fmt.Errorf("reading pcap file header: %w", unexpected(err))
		}
	default:
		return nil, fmt.Errorf(errNotCaptureFmt, quoteMagic(magic))
	}
	return c, nil
}

// readBufSize is the size of the read buffer for r: 64 KiB, or less when
// r tells its length (a bytes.Reader, a strings.Reader) and that is
// shorter, as a buffer longer than the input costs only its zeroing. It
// is never below 512 bytes, which holds every Peek of Open.
func readBufSize(r io.Reader) int {
	const size = 64 << 10
	if l, ok := r.(interface{ Len() int }); ok && l.Len() < size {
		return max(l.Len(), 512)
	}
	return size
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

// pcapReader reads the records of a classic pcap file (the format of
// libpcap's savefile.c: a 24-byte file header, then per record a 16-byte
// header of seconds, fraction, captured length and original length, and
// the captured bytes). Its buffer grows to the longest record read, not to
// maxSnaplen.
type pcapReader struct {
	r     io.Reader // past the file header
	order binary.ByteOrder
	// nsPerUnit turns the fraction of a record's time stamp into
	// nanoseconds: 1000 for a microsecond file, 1 for a nanosecond one.
	nsPerUnit uint32
	hdr       [pcapRecordHeaderLen]byte
	buf       []byte
}

// newPcapReader reads the classic pcap file header from r (whose magic
// the caller has checked) and checks its version: 2.4, the only one
// libpcap writes.
func newPcapReader(r io.Reader) (*pcapReader, error) {
	var hdr [pcapFileHeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	p := &pcapReader{r: r, order: pcapOrder(hdr[:]), nsPerUnit: 1000}
	if m := binary.LittleEndian.Uint32(hdr[:]); m == magicPcapNsLE || m == magicPcapNsBE {
		p.nsPerUnit = 1
	}
	if v := p.order.Uint16(hdr[4:]); v != 2 {
		return nil, fmt.Errorf("unknown major version %d", v)
	}
	if v := p.order.Uint16(hdr[6:]); v != 4 {
		return nil, fmt.Errorf("unknown minor version %d", v)
	}
	return p, nil
}

// next reads the next record: its data (valid until the next call), time
// stamp and original length. A record whose original length is less than
// its captured length (a writer's slip) is read, as Wireshark reads it,
// with the original length raised to the captured one. It returns io.EOF
// at the clean end of the file, ErrTruncated when the file stops inside a
// record, and an error for a record longer than maxSnaplen.
func (p *pcapReader) next() (data []byte, ts time.Time, origLen int, err error) {
	if _, err = io.ReadFull(p.r, p.hdr[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			err = ErrTruncated
		}
		return nil, ts, 0, err
	}
	caplen, origlen := p.order.Uint32(p.hdr[8:]), p.order.Uint32(p.hdr[12:])
	if caplen > maxSnaplen {
		return nil, ts, 0, fmt.Errorf("capture length exceeds snap length: %d > %d", caplen, maxSnaplen)
	}
	if cap(p.buf) < int(caplen) {
		p.buf = make([]byte, caplen)
	}
	data = p.buf[:caplen]
	if _, err = io.ReadFull(p.r, data); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			err = ErrTruncated
		}
		return nil, ts, 0, err
	}
	// The fraction times nsPerUnit in 32 bits, as gopacket's pcapgo
	// (v1.1.19) reads it: a microsecond fraction of 4294968 or more
	// (beyond a second, which libpcap never writes) wraps.
	ts = time.Unix(int64(p.order.Uint32(p.hdr[0:])), int64(p.order.Uint32(p.hdr[4:])*p.nsPerUnit)).UTC()
	return data, ts, int(max(origlen, caplen)), nil
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
		data, ts, origLen, err := c.pcap.next()
		if err != nil {
			return rec, err
		}
		return Record{Data: data, TS: ts, CapLen: len(data), OrigLen: origLen, LinkType: c.LinkType}, nil
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
