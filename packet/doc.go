// Package packet holds gorxe's RoCEv2 wire formats: the Base Transport Header
// (BTH) and every extension header (RDETH, DETH, RETH, AtomicETH, AETH,
// AtomicAckETH, ImmDt, IETH, FETH), the opcode table that says which headers
// each opcode carries, 24-bit PSN serial arithmetic, the AETH syndrome and
// credit encodings, and the invariant CRC (ICRC) over the IPv4 and IPv6
// pseudo-headers. It also holds the management datagrams that travel on
// QP1 (mad.go: the MAD header and the communication-management messages of
// IBA 12.6) and the IP addressing of RDMA CM (rdmacm.go, IBTA Annex A11).
//
// A RoCEv2 packet, as a UDP socket hands it over (IBA Annex A17):
//
//	| BTH 12 B | extension headers | payload | pad 0..3 | ICRC 4 B |
//
// Everything here is allocation-free and does no I/O: headers are views over
// a caller's []byte (in the style of gVisor's tcpip/header), Parse returns a
// small value, and encoders write into a buffer the caller owns; Begin and
// Frame.Seal build a whole packet, ICRC included, in place. The layouts
// and the opcode table follow the IBTA specification, volume 1, chapter 9
// (transport layer), and mirror the kernel's rxe_hdr.h and rxe_opcode.c.
//
// The ICRC covers the IPv4 Identification and flags, which a plain UDP socket
// neither sets nor sees, so the ICRC functions take the IP/UDP pseudo-header
// (addresses, ports, IPv4 ID and flags) as an explicit input: see
// PseudoHeader. A receiver that sees a packet whose ICRC was computed over
// an IPv4 ID it cannot read recovers the ID (PseudoHeader.RecoverIPv4ID),
// and a sender whose kernel assigns the ID afterwards rewrites the ICRC for
// it (RewriteIPv4ID). For captures, ParseFrame and IPFromLink take a packet
// out of its link-layer frame (LinkType) and UDPChecksum checks its UDP
// checksum.
package packet
