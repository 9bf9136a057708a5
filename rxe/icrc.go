package rxe

import (
	"encoding/binary"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
)

// checkICRC verifies a received packet's ICRC (IBA A17.4.4). The pseudo-
// header comes from the datagram's addresses; for IPv4 the IP ID is not
// delivered by the socket: one CRC pass gives the ICRC for ID 0 with DF
// (gorxe peers, many NICs), and if the packet's differs, the one ID that
// explains the difference is recovered from it (kernel rxe sends non-zero
// IDs, and the k-th datagram of a gorxe peer's UDP GSO send carries ID k);
// StrictICRC accepts only IDs below gsoMaxID. pre is the reading
// goroutine's remembered pseudo-header register. recovered reports a
// valid packet whose IPv4 ID was not 0; the caller counts those
// (Counters.ICRCRecovered). See docs/icrc.md.
func (d *Device) checkICRC(pkt []byte, m *netdev.Message, pre *packet.ICRCPrefix) (ok, recovered bool) {
	dst := m.Local
	if !dst.IsValid() || dst.IsUnspecified() {
		dst = d.addr
	}
	ph := packet.PseudoHeader{Src: m.Addr.Addr(), Dst: dst, SrcPort: m.Addr.Port(), DstPort: d.port}
	if !ph.Is4() {
		if crc, err := pre.ICRC(&ph, pkt); err == nil && crc == binary.LittleEndian.Uint32(pkt[len(pkt)-packet.ICRCSize:]) {
			return true, false
		}
		d.counters.badICRC.Add(1)
		return false, false
	}
	ph.IPFlags = packet.IPv4FlagDF
	if id, ok := pre.RecoverIPv4ID(&ph, pkt); ok && (!d.opts.StrictICRC || id < gsoMaxID) {
		return true, id != 0
	}
	d.counters.badICRC.Add(1)
	return false, false
}

// gsoMaxID bounds the IPv4 IDs of the datagrams of one UDP GSO send from an
// unconnected IP_PMTUDISC_DO socket: 0 to the segment count minus one
// (netdev's TestGSOSegmentIDs), at most 64 segments.
const gsoMaxID = 64
