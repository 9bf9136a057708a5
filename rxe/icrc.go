package rxe

import (
	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
)

// checkICRC verifies a received packet's ICRC (IBA A17.4.4). The pseudo-
// header comes from the datagram's addresses; for IPv4 the IP ID is not
// delivered by the socket: ID 0 with DF is tried first (gorxe peers, many
// NICs), then, unless StrictICRC, the one ID that makes the CRC match is
// recovered (kernel rxe sends non-zero IDs); see docs/icrc.md.
func (d *Device) checkICRC(pkt []byte, m *netdev.Message) bool {
	dst := m.Local
	if !dst.IsValid() || dst.IsUnspecified() {
		dst = d.addr
	}
	ph := packet.PseudoHeader{Src: m.Addr.Addr(), Dst: dst, SrcPort: m.Addr.Port(), DstPort: d.port}
	if ph.Is4() {
		ph.IPFlags = packet.IPv4FlagDF
	}
	if ph.CheckICRC(pkt) == nil {
		return true
	}
	if ph.Is4() && !d.opts.StrictICRC {
		if _, ok := ph.RecoverIPv4ID(pkt); ok {
			d.counters.icrcRecovered.Add(1)
			return true
		}
	}
	d.counters.badICRC.Add(1)
	return false
}
