// Package sge walks scatter/gather lists: the one place where the
// requester and the responder copy message bytes between a packet and the
// memory regions an SGE list names, one region chunk at a time, as kernel
// rxe's copy_data does (the DMA state there is a Cursor here).
package sge

import (
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// Memory resolves local keys. Local returns the length bytes at addr of the
// memory region whose L_Key is lkey, if the region holds them and grants
// need (0 to read for sending, verbs.AccessLocalWrite to write); the slice
// is exactly length bytes long.
type Memory interface {
	Local(lkey uint32, addr uint64, length uint32, need verbs.AccessFlags) ([]byte, bool)
}

// Cursor is a position in an SGE list: the SGE index and the byte offset
// in that SGE. The zero value is the start of the list.
type Cursor struct {
	Index  int
	Offset uint32
}

// Seek moves c to byte off of the message sges describe; past the end it
// points at the end (Index = len(sges)).
func (c *Cursor) Seek(sges []verbs.SGE, off uint32) {
	for i := range sges {
		if off < sges[i].Length {
			*c = Cursor{Index: i, Offset: off}
			return
		}
		off -= sges[i].Length
	}
	*c = Cursor{Index: len(sges)}
}

// Gather copies the next len(dst) bytes of the list from memory into dst
// and advances c. It reports false if the list ends first or an L_Key does
// not resolve (rxe: a local protection error); c then points at the chunk
// that failed and dst holds the bytes before it.
func (c *Cursor) Gather(mem Memory, sges []verbs.SGE, dst []byte) bool {
	return c.walk(mem, sges, dst, 0, nil)
}

// GatherICRC is Gather that also folds the gathered bytes into the ICRC
// register crc as it copies them (packet.ICRCCopy, one read of each
// byte), and returns the register after them. When it reports false the
// register covers the bytes copied before the chunk that failed.
func (c *Cursor) GatherICRC(mem Memory, sges []verbs.SGE, dst []byte, crc uint32) (uint32, bool) {
	ok := c.walk(mem, sges, dst, 0, &crc)
	return crc, ok
}

// Scatter copies src into memory at the next len(src) bytes of the list,
// which must grant local write access, and advances c. It reports false as
// Gather does.
func (c *Cursor) Scatter(mem Memory, sges []verbs.SGE, src []byte) bool {
	return c.walk(mem, sges, src, verbs.AccessLocalWrite, nil)
}

// Check resolves the next n bytes of the list as Scatter would write them,
// with local write access, without copying, and advances c. It reports
// false as Scatter does. It is for bytes already in place (placed ahead
// of their packet), whose L_Keys must still resolve when the packet
// executes, as a copy then would need them to.
func (c *Cursor) Check(mem Memory, sges []verbs.SGE, n uint32) bool {
	for n > 0 {
		m, ok := c.next(mem, sges, n, verbs.AccessLocalWrite)
		if !ok {
			return false
		}
		n -= uint32(len(m))
	}
	return true
}

// walk copies b out of memory (need 0) or into it (need
// AccessLocalWrite), chunk by chunk; out of memory with a non-nil crc it
// folds each chunk into *crc as it copies it.
func (c *Cursor) walk(mem Memory, sges []verbs.SGE, b []byte, need verbs.AccessFlags, crc *uint32) bool {
	for len(b) > 0 {
		m, ok := c.next(mem, sges, uint32(len(b)), need)
		if !ok {
			return false
		}
		n := len(m)
		switch {
		case crc != nil:
			*crc = packet.ICRCCopy(*crc, b[:n], m)
		case need == 0:
			Copy(b[:n], m)
		default:
			Copy(m, b[:n])
		}
		b = b[n:]
	}
	return true
}

// next resolves the list's next chunk of at most want (> 0) bytes, with
// access need, and advances c past it. It reports false, with c at that
// chunk, if the list ends first or the chunk's L_Key does not resolve.
func (c *Cursor) next(mem Memory, sges []verbs.SGE, want uint32, need verbs.AccessFlags) ([]byte, bool) {
	for c.Index < len(sges) {
		s := &sges[c.Index]
		avail := s.Length - c.Offset
		if avail == 0 {
			c.Index, c.Offset = c.Index+1, 0
			continue
		}
		n := min(avail, want)
		m, ok := mem.Local(s.LKey, s.Addr+uint64(c.Offset), n, need)
		if !ok || uint32(len(m)) != n {
			return nil, false
		}
		c.Offset += n
		return m, true
	}
	return nil, false
}
