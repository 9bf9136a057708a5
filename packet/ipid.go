package packet

import (
	"encoding/binary"
	"hash/crc32"
	"sync"
	"sync/atomic"
)

// Rewriting the ICRC for another IPv4 Identification.
//
// A sender that hands the kernel a run of packets as one UDP GSO buffer
// does not send them all with the same IPv4 ID: the kernel gives the k-th
// segment the ID of the first plus k. By the linearity that RecoverIPv4ID
// uses, the ICRC for ID y is the ICRC for ID x XOR the CRC register
// contribution of x^y in the two ID bytes, carried through the bytes that
// follow them: sixteen columns per packet length (idCols), cached, so the
// rewrite costs no pass over the packet.

// zeroByteOp is "feed one zero byte" on the raw CRC register.
var zeroByteOp = func() gf2 {
	var m gf2
	tab := crc32.IEEETable
	for j := range m {
		c := uint32(1) << j
		m[j] = tab[byte(c)] ^ c>>8
	}
	return m
}()

// maxCachedTail bounds the tail lengths whose operator is cached (every
// packet of an IB MTU of 4096 has a shorter tail).
const maxCachedTail = 8192

// powCache holds the powers of one operator by exponent, below
// maxCachedTail (RecoverIPv4ID's inverse of feeding n zero bytes).
type powCache struct {
	ops [maxCachedTail]atomic.Pointer[gf2]
	mu  sync.Mutex
}

// pow returns base to the n-th power (square and multiply), cached for n
// below maxCachedTail. base must be the same on every call.
func (c *powCache) pow(base *gf2, n int) *gf2 {
	if n >= maxCachedTail {
		r := base.pow(n)
		return &r
	}
	if m := c.ops[n].Load(); m != nil {
		return m
	}
	r := base.pow(n)
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.ops[n].Load(); m != nil {
		return m
	}
	c.ops[n].Store(&r)
	return &r
}

// pow returns m to the n-th power (square and multiply).
func (m *gf2) pow(n int) gf2 {
	r := gf2{}
	for j := range r {
		r[j] = 1 << j
	}
	p := *m
	for k := n; k > 0; k >>= 1 {
		if k&1 != 0 {
			r = r.mul(&p)
		}
		p = p.mul(&p)
	}
	return r
}

// idCols is the change of a packet's ICRC caused by each bit of its IPv4
// ID: col[j] for bit 1<<j, for one packet length. The change for an ID
// change x is the XOR of the columns of x's set bits (linearity).
type idCols [16]uint32

// apply returns the ICRC change for the ID change x, without a branch on
// x's bits (the segment numbers of a GSO run change from call to call).
func (c *idCols) apply(x uint16) uint32 {
	var r uint32
	v := uint32(x)
	for j := 0; j < 16; j += 4 {
		r ^= c[j]&-(v>>j&1) ^ c[j+1]&-(v>>(j+1)&1) ^
			c[j+2]&-(v>>(j+2)&1) ^ c[j+3]&-(v>>(j+3)&1)
	}
	return r
}

// idColsByTail caches idCols by the tail length after the ID
// (ipv4IDTail), below maxCachedTail: a GSO run rewrites one ID per
// segment, all of one length but the last.
var idColsByTail [maxCachedTail]atomic.Pointer[idCols]

// ipv4IDCols returns the idCols of an n-byte packet: each ID bit's
// register contribution (two bytes through the CRC table from a zero
// register) carried through the tail by feeding zero bytes.
func ipv4IDCols(n int) *idCols {
	tail := ipv4IDTail(n)
	if tail < maxCachedTail {
		if c := idColsByTail[tail].Load(); c != nil {
			return c
		}
	}
	zeros := zeroByteOp.pow(tail)
	tab := crc32.IEEETable
	c := new(idCols)
	for j := range c {
		x := uint16(1) << j
		r := tab[byte(x>>8)]
		r = tab[byte(r)^byte(x)] ^ r>>8
		c[j] = zeros.apply(r)
	}
	if tail < maxCachedTail {
		idColsByTail[tail].Store(c) // racing stores store equal columns
	}
	return c
}

// ipv4IDTail is the number of ICRC input bytes after the IPv4 ID for a
// RoCE packet of n bytes (BTH through ICRC): the rest of the masked LRH's
// eight bytes come before it; after it, the IPv4 header's last 14 bytes,
// the UDP header and the packet without its ICRC.
func ipv4IDTail(n int) int {
	return IPv4HeaderSize - 6 + UDPHeaderSize + n - ICRCSize
}

// ipv4IDDelta is the change of the ICRC of an n-byte packet when its IPv4
// ID changes by x (XOR).
func ipv4IDDelta(n int, x uint16) uint32 { return ipv4IDCols(n).apply(x) }

// RewriteIPv4ID changes the ICRC at the end of pkt (a RoCEv2 packet over
// IPv4, BTH through ICRC) from the one for IPv4 ID from to the one for ID
// to, everything else being equal. It does nothing to a packet too short to
// hold a BTH and an ICRC. It reads only pkt's length, not its bytes.
func RewriteIPv4ID(pkt []byte, from, to uint16) {
	if from == to || len(pkt) < BTHSize+ICRCSize {
		return
	}
	tail := pkt[len(pkt)-ICRCSize:]
	binary.LittleEndian.PutUint32(tail, binary.LittleEndian.Uint32(tail)^ipv4IDDelta(len(pkt), from^to))
}
