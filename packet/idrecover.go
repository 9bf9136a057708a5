package packet

import (
	"encoding/binary"
	"hash/crc32"
)

// Recovering the IPv4 Identification of a received packet.
//
// The ICRC covers the IPv4 ID, which a UDP socket does not deliver. Kernel
// rxe (and some NICs) send a non-zero ID, so a receiver that assumes ID 0
// cannot verify their ICRCs. But the ID is the only unknown, and CRC-32 is
// linear over GF(2): for a fixed length, ICRC(ID=x) = ICRC(ID=0) ^ L(x),
// where L(x) is the CRC register contribution of the two ID bytes carried
// through the bytes that follow them. So L(x) = ICRC(ID=0) ^ wire is
// known; undoing the carry through the tail (a linear map, inverted once
// per packet length and cached) gives the register right after the ID
// bytes, from which the two bytes are read back through the CRC table. A
// packet whose payload was corrupted yields a register that no 16-bit ID
// produces, except with probability 2^-16: the ICRC keeps 16 of its 32 bits
// of protection.

// gf2 is a 32x32 matrix over GF(2), stored by columns: col[j] is the image
// of the basis vector 1<<j.
type gf2 [32]uint32

// apply returns m·v. It takes no branch on v's bits: the deltas it is
// applied to per received packet (RecoverIPv4ID) and per GSO segment
// (RewriteIPv4ID) change from packet to packet, and a branch per bit
// mispredicts about half the time.
func (m *gf2) apply(v uint32) uint32 {
	var r uint32
	for j := 0; j < 32; j += 4 {
		r ^= m[j]&-(v>>j&1) ^ m[j+1]&-(v>>(j+1)&1) ^
			m[j+2]&-(v>>(j+2)&1) ^ m[j+3]&-(v>>(j+3)&1)
	}
	return r
}

func (m *gf2) mul(b *gf2) gf2 {
	var r gf2
	for j := range r {
		r[j] = m.apply(b[j])
	}
	return r
}

// invert returns the inverse of m (which must be invertible), by
// Gauss-Jordan elimination on rows [m | I].
func (m *gf2) invert() gf2 {
	var rows [32]uint64
	for i := range 32 {
		var r uint32
		for j := range 32 {
			r |= (m[j] >> i & 1) << j
		}
		rows[i] = uint64(r) | uint64(1)<<(32+i)
	}
	for c := range 32 {
		p := c
		for rows[p]>>c&1 == 0 {
			p++ // the zero-byte operator is invertible: a pivot exists
		}
		rows[c], rows[p] = rows[p], rows[c]
		for i := range 32 {
			if i != c && rows[i]>>c&1 != 0 {
				rows[i] ^= rows[c]
			}
		}
	}
	var inv gf2
	for i := range 32 {
		r := uint32(rows[i] >> 32)
		for j := range 32 {
			inv[j] |= (r >> j & 1) << i
		}
	}
	return inv
}

var (
	zeroByteInv gf2       // inverse of "feed one zero byte" on the raw register
	topByteIdx  [256]byte // i such that crc32 table[i]>>24 == b
	unzeroOps   powCache  // tail length -> the inverse of feeding that many zero bytes
)

func init() {
	tab := crc32.IEEETable
	zeroByteInv = zeroByteOp.invert()
	for i := range 256 {
		topByteIdx[tab[i]>>24] = byte(i)
	}
}

// unzero returns the inverse of feeding n zero bytes.
func unzero(n int) *gf2 { return unzeroOps.pow(&zeroByteInv, n) }

// RecoverIPv4ID finds the IPv4 Identification that makes pkt's ICRC match,
// with ph's other fields (IPID is ignored). It reports false if no ID
// does (a corrupted packet, a wrong pseudo-header, or IPv6). The cost is
// one CRC pass over the packet (the ICRC for ID 0, which also answers ID 0
// itself) plus, once per packet length, a small matrix inversion.
func (ph *PseudoHeader) RecoverIPv4ID(pkt []byte) (id uint16, ok bool) {
	return (*ICRCPrefix)(nil).RecoverIPv4ID(ph, pkt)
}

// RecoverIPv4ID is ph.RecoverIPv4ID(pkt), with the register of ph's
// headers (for ID 0) and len(pkt) remembered.
func (c *ICRCPrefix) RecoverIPv4ID(ph *PseudoHeader, pkt []byte) (id uint16, ok bool) {
	if !ph.Is4() || len(pkt) < BTHSize+ICRCSize || !ph.valid() {
		return 0, false
	}
	zero := *ph
	zero.IPID = 0
	crc0 := c.icrc(&zero, pkt) // length and ph checked above
	delta := crc0 ^ binary.LittleEndian.Uint32(pkt[len(pkt)-ICRCSize:])
	if delta == 0 {
		return 0, true
	}
	// The CRC input is 8 bytes of 0xFF, the 20-byte IPv4 header (ID at
	// offset 4), the UDP header and the packet without its ICRC: the ID's
	// two bytes are followed by tail bytes.
	tail := 8 + IPv4HeaderSize + UDPHeaderSize + len(pkt) - ICRCSize - (8 + 6)
	v := unzero(tail).apply(delta) // the register right after the ID bytes, from a zero start
	tab := crc32.IEEETable
	// v = tab[byte(c1) ^ lo] ^ c1>>8 with c1 = tab[hi]; c1>>8 has a zero
	// top byte, so v's top byte names the second table index.
	i2 := topByteIdx[v>>24]
	rest := v ^ tab[i2] // == c1 >> 8
	hi := topByteIdx[byte(rest>>16)]
	c1 := tab[hi]
	if c1>>8 != rest {
		return 0, false
	}
	lo := i2 ^ byte(c1)
	// The two bytes hi, lo now produce exactly v from a zero register
	// (tab[byte(c1)^lo] ^ c1>>8 = tab[i2] ^ rest = v), so by linearity the
	// ICRC for this ID equals the packet's: no confirming pass is needed.
	return uint16(hi)<<8 | uint16(lo), true
}
