package dump

import (
	"net/netip"
	"strconv"

	"github.com/gorxe/gorxe/packet"
)

// appendCM appends a summary of the CM MAD a QP1 packet carries (IBA
// 12.6): the message, the transaction ID, the local and remote
// communication IDs and, by message, the service ID (with RDMA CM's port),
// the QPN, the starting PSN, the path MTU, a REQ's retry counts and
// local ACK timeout, a REP's RNR retry count, the REJ reason, a SIDR_REQ's
// request ID, a SIDR_REP's status, QPN and Q_Key and, under an IP CM
// service ID, the IP addresses of RDMA CM's private-data header (REQ,
// SIDR_REQ).
// It appends nothing for a packet that is not a UD packet to QP1. A MAD of
// another management class shows its class, one of the CM class but of
// another base version than 1 that version, of another class version
// than 2 its header and class version, one the capture cut short its
// header if that was captured, and one shorter than a MAD MALFORMED.
func appendCM(b []byte, f *Frame) []byte {
	p := &f.Packet
	if p.DestQP() != packet.GSIQPN || p.Opcode().Transport() != packet.TransportUD {
		return b
	}
	pay := p.Payload()
	if f.Truncated {
		// Only the MAD bytes the capture holds.
		pay = pay[:min(len(pay), max(f.Captured-p.HeaderLen(), 0))]
		if !f.HeadersCaptured() {
			return b
		}
	}
	h, msg, err := packet.DecodeCMHeader(pay)
	if err == nil {
		attr := packet.CMAttr(h.AttrID)
		b = appendMADHeader(b, &h)
		return appendCMMessage(b, attr, msg)
	}
	if len(pay) >= 4 && pay[1] != packet.MgmtClassCM {
		b = append(b, " mad class="...)
		return appendHex(b, uint64(pay[1]), 2)
	}
	if h.Decode(pay) != nil { // not even a MAD header
		if f.Truncated {
			return append(b, " mad (header not captured)"...)
		}
		return append(b, " mad MALFORMED"...)
	}
	switch {
	case h.BaseVersion != packet.MADBaseVersion:
		b = append(b, " mad base_version="...)
		return strconv.AppendUint(b, uint64(h.BaseVersion), 10)
	case h.ClassVersion != packet.CMClassVersion:
		// The CM's class version is 2 (IBA 1.2 and later); kernel ib_cm
		// drops a CM MAD of any other, and packet.DecodeCMHeader
		// refuses it.
		b = appendMADHeader(b, &h)
		b = append(b, " class_version="...)
		b = strconv.AppendUint(b, uint64(h.ClassVersion), 10)
		return append(b, " (not the CM's 2: message not decoded)"...)
	case f.Truncated:
		b = appendMADHeader(b, &h)
		return append(b, " (message not captured)"...)
	}
	return append(b, " mad MALFORMED"...)
}

// appendMADHeader appends the CM attribute and transaction ID of a MAD
// header.
func appendMADHeader(b []byte, h *packet.MADHeader) []byte {
	b = append(b, " cm="...)
	b = append(b, packet.CMAttr(h.AttrID).String()...)
	b = append(b, " tid="...)
	return appendHex(b, h.TID, 16)
}

// appendCMMessage appends the fields of the CM message msg of kind attr.
func appendCMMessage(b []byte, attr packet.CMAttr, msg []byte) []byte {
	ids := func(b []byte, local, remote uint32) []byte {
		b = append(b, " lcid="...)
		b = appendHex(b, uint64(local), 8)
		b = append(b, " rcid="...)
		return appendHex(b, uint64(remote), 8)
	}
	switch attr {
	case packet.AttrREQ:
		var m packet.REQ
		if err := m.Decode(msg); err != nil {
			return appendCMErr(b, err)
		}
		b = append(b, " lcid="...)
		b = appendHex(b, uint64(m.LocalCommID), 8)
		b = appendServiceID(b, m.ServiceID)
		b = appendQPNPSN(b, m.LocalQPN, m.StartingPSN)
		b = appendPathMTU(b, m.PathMTU)
		// What the passive side's QP takes (IBA 12.7.27, 12.7.38): the
		// retry counts and the primary path's local ACK timeout exponent,
		// which set how long a QP waits before RETRY_EXC_ERR.
		b = append(b, " retry="...)
		b = strconv.AppendUint(b, uint64(m.RetryCount), 10)
		b = append(b, " rnr_retry="...)
		b = strconv.AppendUint(b, uint64(m.RNRRetryCount), 10)
		b = append(b, " ack_timeout="...)
		b = strconv.AppendUint(b, uint64(m.Primary.LocalACKTimeout), 10)
		b = appendCMIP(b, m.ServiceID, m.PrivateData[:])
	case packet.AttrREP:
		var m packet.REP
		if err := m.Decode(msg); err != nil {
			return appendCMErr(b, err)
		}
		b = ids(b, m.LocalCommID, m.RemoteCommID)
		b = appendQPNPSN(b, m.LocalQPN, m.StartingPSN)
		b = append(b, " rnr_retry="...)
		b = strconv.AppendUint(b, uint64(m.RNRRetryCount), 10)
	case packet.AttrRTU:
		var m packet.RTU
		if err := m.Decode(msg); err != nil {
			return appendCMErr(b, err)
		}
		b = ids(b, m.LocalCommID, m.RemoteCommID)
	case packet.AttrDREQ:
		var m packet.DREQ
		if err := m.Decode(msg); err != nil {
			return appendCMErr(b, err)
		}
		b = ids(b, m.LocalCommID, m.RemoteCommID)
		b = append(b, " rqpn="...)
		b = appendHex(b, uint64(m.RemoteQPN), 6)
	case packet.AttrDREP:
		var m packet.DREP
		if err := m.Decode(msg); err != nil {
			return appendCMErr(b, err)
		}
		b = ids(b, m.LocalCommID, m.RemoteCommID)
	case packet.AttrREJ:
		var m packet.REJ
		if err := m.Decode(msg); err != nil {
			return appendCMErr(b, err)
		}
		b = ids(b, m.LocalCommID, m.RemoteCommID)
		b = append(b, " reason="...)
		b = strconv.AppendUint(b, uint64(m.Reason), 10)
		b = append(b, " ("...)
		b = append(b, m.Reason.String()...)
		b = append(b, ')')
	case packet.AttrMRA:
		var m packet.MRA
		if err := m.Decode(msg); err != nil {
			return appendCMErr(b, err)
		}
		b = ids(b, m.LocalCommID, m.RemoteCommID)
		b = append(b, " timeout="...)
		b = strconv.AppendUint(b, uint64(m.ServiceTimeout), 10)
	case packet.AttrSIDRREQ:
		var m packet.SIDRREQ
		if err := m.Decode(msg); err != nil {
			return appendCMErr(b, err)
		}
		b = append(b, " reqid="...)
		b = appendHex(b, uint64(m.RequestID), 8)
		b = appendServiceID(b, m.ServiceID)
		// rdma_cm's SIDR_REQ carries the same IP header as its REQ
		// (kernel cma_resolve_ib_udp).
		b = appendCMIP(b, m.ServiceID, m.PrivateData[:])
	case packet.AttrSIDRREP:
		var m packet.SIDRREP
		if err := m.Decode(msg); err != nil {
			return appendCMErr(b, err)
		}
		b = append(b, " reqid="...)
		b = appendHex(b, uint64(m.RequestID), 8)
		b = append(b, " status="...)
		b = strconv.AppendUint(b, uint64(m.Status), 10)
		if int(m.Status) < len(sidrStatusNames) {
			b = append(b, " ("...)
			b = append(b, sidrStatusNames[m.Status]...)
			b = append(b, ')')
		}
		b = appendServiceID(b, m.ServiceID)
		b = append(b, " qpn="...)
		b = appendHex(b, uint64(m.QPN), 6)
		b = append(b, " qkey="...)
		b = appendHex(b, uint64(m.QKey), 8)
	}
	return b
}

// sidrStatusNames are the SIDR_REP statuses of IBA 12.11.2 (table 120),
// by value; 6 to 255 are reserved.
var sidrStatusNames = [...]string{"valid", "service ID not supported", "rejected", "no QP", "redirect", "SIDR version not supported"}

// appendCMIP appends the IP addresses and source port of RDMA CM's header
// at the start of a REQ's or SIDR_REQ's private data pd. The private data
// starts with that header only under an IP CM service ID (IBTA Annex
// A11.2.1, A11.2.2.1); under any other it is the consumer's own, and
// nothing is appended.
func appendCMIP(b []byte, serviceID uint64, pd []byte) []byte {
	var ip packet.CMIPHeader
	if _, _, ipcm := packet.ParseRDMACMServiceID(serviceID); !ipcm || ip.Decode(pd) != nil {
		return b
	}
	b = append(b, " ip="...)
	b = netip.AddrPortFrom(ip.Src, ip.SrcPort).AppendTo(b)
	b = append(b, "→"...)
	return ip.Dst.AppendTo(b)
}

// appendCMErr marks a CM message whose fields do not decode.
func appendCMErr(b []byte, err error) []byte {
	b = append(b, " MALFORMED ("...)
	b = append(b, err.Error()...)
	return append(b, ')')
}

// appendServiceID appends a service ID and, for an RDMA CM one, its port
// space and port.
func appendServiceID(b []byte, id uint64) []byte {
	b = append(b, " sid="...)
	b = appendHex(b, id, 16)
	if proto, port, ok := packet.ParseRDMACMServiceID(id); ok {
		switch proto {
		case packet.RDMACMProtoTCP:
			b = append(b, " (tcp:"...)
		case packet.RDMACMProtoUDP:
			b = append(b, " (udp:"...)
		default:
			b = append(b, " (ps="...)
			b = appendHex(b, uint64(proto), 2)
			b = append(b, ':')
		}
		b = strconv.AppendUint(b, uint64(port), 10)
		b = append(b, ')')
	}
	return b
}

func appendQPNPSN(b []byte, qpn, psn uint32) []byte {
	b = append(b, " qpn="...)
	b = appendHex(b, uint64(qpn), 6)
	b = append(b, " spsn="...)
	return strconv.AppendUint(b, uint64(psn), 10)
}

// appendPathMTU appends the 4-bit path MTU code of a REQ: the IBA MTU
// enumeration, in which 1 to 5 are 256 to 4096 bytes and the other codes
// are reserved (shown as the code, not as a size no path has).
func appendPathMTU(b []byte, code uint8) []byte {
	b = append(b, " mtu="...)
	if code >= 1 && code <= 5 {
		return strconv.AppendInt(b, int64(128)<<code, 10)
	}
	b = append(b, "code "...)
	b = strconv.AppendUint(b, uint64(code), 10)
	return append(b, " (reserved)"...)
}
