package dump

import (
	"encoding/binary"
	"errors"
	"io"

	"github.com/google/gopacket/layers"
)

// errCorruptNg reports a pcapng block whose lengths are impossible.
var errCorruptNg = errors.New("corrupt pcapng block (impossible length)")

// pcapng block types and the byte-order magic (pcapng specification,
// draft-ietf-opsawg-pcapng).
const (
	ngBlockSHB = 0x0A0D0D0A // section header: the same in both byte orders
	ngBlockIDB = 1          // interface description
	ngBlockPB  = 2          // packet (obsolete)
	ngBlockSPB = 3          // simple packet
	ngBlockEPB = 6          // enhanced packet
	ngBOM      = 0x1A2B3C4D
)

// ngGuard stands between a pcapng byte stream and pcapgo's NgReader,
// following the block structure. It reads each block's header before
// handing it on, so that it can:
//
//   - record the full 16-bit link type of every Interface Description
//     Block, which pcapgo v1.1.19 truncates to 8 bits (layers.LinkType is a
//     uint8: LINUX_SLL2, 276, arrives as 20);
//   - refuse, before pcapgo sees it, a packet block whose captured length
//     exceeds the block or maxSnaplen, and lower an interface's snap length
//     above maxSnaplen to it: pcapgo allocates those lengths, up to 4 GiB;
//   - turn an end of file inside a block into io.ErrUnexpectedEOF, where
//     pcapgo would report a clean io.EOF;
//   - keep the raw time stamp and the interface's full link type of
//     every packet block it passes, in order, for Capture.Next (see
//     stamp): pcapgo gives neither exactly.
type ngGuard struct {
	r     io.Reader
	big   bool     // byte order of the current section
	hdr   [28]byte // header of the current block
	nhdr  int      // bytes of hdr read
	need  int      // bytes of hdr wanted (grows once the type is known)
	out   int      // bytes of a checked hdr handed on
	ok    bool     // hdr is checked and being handed on
	rest  int64    // bytes of the current block after hdr still to pass
	snap0 uint32   // snap length of interface 0 of the section (for SPBs)
	nIDB  int      // IDBs seen in the current section
	seen  []LinkType
	// links are the link types of the current section's interfaces, by
	// interface ID.
	links []LinkType
	// stamps holds what the packet blocks passed on and not yet taken by
	// stamp say, in file order (no time stamp for a simple packet
	// block, which has none). pcapgo reads ahead, so it may hold
	// several, never more than the blocks in its buffer.
	stamps []ngStamp
	err    error // sticky
}

// ngStamp is what a packet block says of its packet: the raw 64-bit time
// stamp (ok) and the full link type of its interface (linkOK: the
// interface was described before it).
type ngStamp struct {
	units  uint64
	ok     bool
	link   LinkType
	linkOK bool
}

// stamp returns what the oldest packet block passed on and not yet taken
// says: the block of the packet pcapgo returned last, as it returns every
// packet block in file order.
func (g *ngGuard) stamp() ngStamp {
	if len(g.stamps) == 0 {
		return ngStamp{}
	}
	s := g.stamps[0]
	g.stamps = g.stamps[1:]
	return s
}

// linkOf returns the link type of interface id of the current section.
func (g *ngGuard) linkOf(id uint32) (LinkType, bool) {
	if id >= uint32(len(g.links)) {
		return 0, false
	}
	return g.links[id], true
}

func (g *ngGuard) order() binary.ByteOrder {
	if g.big {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

// Read passes the stream through, block by block.
func (g *ngGuard) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for g.err == nil {
		switch {
		case g.ok: // hand on the checked header
			n := copy(p, g.hdr[g.out:g.nhdr])
			if g.out += n; g.out == g.nhdr {
				g.ok, g.nhdr, g.out, g.need = false, 0, 0, 0
			}
			return n, nil
		case g.rest > 0:
			n, err := g.r.Read(p[:min(int64(len(p)), g.rest)])
			g.rest -= int64(n)
			if err == io.EOF {
				err = io.ErrUnexpectedEOF // the block is not complete
			}
			return n, err
		}
		if g.need == 0 {
			g.need = 8
		}
		n, err := io.ReadFull(g.r, g.hdr[g.nhdr:g.need])
		g.nhdr += n
		if err != nil {
			if err == io.EOF && g.nhdr == 0 {
				return 0, io.EOF // clean end, between blocks
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			g.err = err
			break
		}
		g.check()
	}
	return 0, g.err
}

// check looks at the g.need bytes of header read so far: it asks for more
// once the block type says more is useful, and validates the lengths.
func (g *ngGuard) check() {
	h := g.hdr[:g.nhdr]
	typ := binary.LittleEndian.Uint32(h)
	if typ == ngBlockSHB {
		if g.need < 12 {
			g.need = 12
			return
		}
		switch {
		case binary.BigEndian.Uint32(h[8:]) == ngBOM:
			g.big = true
		case binary.LittleEndian.Uint32(h[8:]) == ngBOM:
			g.big = false
		default:
			g.err = errCorruptNg
			return
		}
		g.nIDB, g.snap0, g.links = 0, 0, nil
	}
	o := g.order()
	typ = o.Uint32(h)
	want := g.need
	switch typ {
	case ngBlockIDB:
		want = 16 // link type, reserved, snap length
	case ngBlockSPB:
		want = 12 // original length
	case ngBlockEPB, ngBlockPB:
		want = 28 // ..., captured length, original length
	}
	if g.need < want {
		g.need = want
		return
	}
	length := int64(o.Uint32(h[4:]))
	if length < int64(max(g.need, 12)) || length%4 != 0 { // type, length, ..., length again
		g.err = errCorruptNg
		return
	}
	switch typ {
	case ngBlockIDB:
		g.seen = append(g.seen, LinkType(o.Uint16(h[8:])))
		g.links = append(g.links, LinkType(o.Uint16(h[8:])))
		snap := o.Uint32(h[12:])
		if snap > maxSnaplen {
			snap = maxSnaplen
			o.PutUint32(h[12:], snap)
		}
		if g.nIDB == 0 {
			g.snap0 = snap
		}
		g.nIDB++
	case ngBlockSPB:
		caplen := int64(o.Uint32(h[8:]))
		if g.snap0 != 0 {
			caplen = min(caplen, int64(g.snap0))
		}
		if caplen > length-16 || caplen > maxSnaplen {
			g.err = errCorruptNg
			return
		}
		s := ngStamp{}
		s.link, s.linkOK = g.linkOf(0) // a simple packet block is interface 0's
		g.stamps = append(g.stamps, s)
	case ngBlockEPB, ngBlockPB:
		if caplen := int64(o.Uint32(h[20:])); caplen > length-32 || caplen > maxSnaplen {
			g.err = errCorruptNg
			return
		}
		// The interface ID (16 bits in a PB, then the drops count), then
		// the time stamp (high, low).
		id := o.Uint32(h[8:])
		if typ == ngBlockPB {
			id = uint32(o.Uint16(h[8:]))
		}
		s := ngStamp{units: uint64(o.Uint32(h[12:]))<<32 | uint64(o.Uint32(h[16:])), ok: true}
		s.link, s.linkOK = g.linkOf(id)
		g.stamps = append(g.stamps, s)
	}
	g.rest, g.ok, g.out = length-int64(g.need), true, 0
}

// full returns the 16-bit link type that pcapgo reported as lt: the one
// link type seen in an IDB whose low byte is lt, or lt itself.
func (g *ngGuard) full(lt layers.LinkType) LinkType {
	found, n := LinkType(lt), 0
	for _, s := range g.seen {
		if uint8(s) == uint8(lt) && (n == 0 || s != found) {
			found, n = s, n+1
		}
	}
	if n == 1 {
		return found
	}
	return LinkType(lt)
}
