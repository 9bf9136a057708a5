package perftest

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/gorxe/gorxe/rxe"
)

// Multicast (-g, -M), as perftest's send_bw and send_lat run it
// (send_set_up_connection, set_multicast_gid): send-bw's server, and both
// ends of send-lat, attach their UD QP to a group and announce the group's
// GID and QPN 0xFFFFFF (QPNUM_MCAST) as their address; the other end sends
// to that address as to any UD peer's. No subnet manager is asked: on RoCE
// a group needs no join MAD (perftest joins on IB only). The QPs are
// created with rxe.QPInitAttr.BlockSelfMcastLoopback: with one -M group
// on both ends of send-lat, an end would otherwise receive its own
// messages, which loop back to the host.

// defaultMGID is perftest's MCG_GID, the group's GID when -M is not given:
// an IPv6 multicast address (ff01:0:2:c985::).
var defaultMGID = netip.AddrFrom16([16]byte{255, 1, 0, 0, 0, 2, 201, 133})

// checkMcast applies perftest's rules for -g (its parser and
// force_dependecies): -g is a SEND test's, makes the connection UD,
// refuses -b, more than one QP and -R; and parses -M.
func (o *options) checkMcast(t Test) error {
	if !o.mcg {
		if o.set["MGID"] {
			return errors.New("-M (--MGID) names the group of -g (--mcg): add -g")
		}
		return nil
	}
	if o.set["connection"] && o.connType != "UD" {
		return fmt.Errorf("-g (--mcg) with -c %s: multicast runs on UD (perftest: \"MultiCast runs on UD!\")", o.connType)
	}
	o.connType = "UD"
	switch {
	case o.bidir:
		return errors.New("-g (--mcg) with -b: perftest: \"Bidirectional mode not supported in multicast\"")
	case o.qps > 1:
		return fmt.Errorf("-g (--mcg) with -q %d: perftest: \"Only 1 QP supported in multicast\"", o.qps)
	case o.rdmaCM:
		return errors.New("-g (--mcg) with -R: perftest: \"Perftest still doesn't support Multicast with rdma_cm\"")
	}
	o.mgidAddr = netip.Addr{}
	if o.mgid == "" {
		return nil
	}
	g, err := parseMGID(o.mgid)
	if err != nil {
		return fmt.Errorf("-M %s: %w", o.mgid, err)
	}
	o.mgidAddr = g
	return nil
}

// parseMGID parses -M: perftest's form, 16 colon-separated bytes each in
// C's strtoll base-0 notation (set_multicast_gid: decimal, 0x hex or 0
// octal), or an IP address. The result must be a multicast address
// (IPv4-mapped for an IPv4 group).
func parseMGID(s string) (netip.Addr, error) {
	g, err := netip.ParseAddr(s)
	if err != nil {
		f := strings.Split(s, ":")
		if len(f) != 16 {
			return netip.Addr{}, fmt.Errorf("neither an IP address nor 16 colon-separated bytes (perftest's form, e.g. 255:1:0:0:0:2:201:133:0:0:0:0:0:0:0:0)")
		}
		var raw [16]byte
		for i, x := range f {
			v, err := strconv.ParseUint(x, 0, 8)
			if err != nil {
				return netip.Addr{}, fmt.Errorf("byte %d (%q) is not a number in [0, 255]", i, x)
			}
			raw[i] = byte(v)
		}
		g = netip.AddrFrom16(raw)
	}
	if !g.Unmap().IsMulticast() {
		return netip.Addr{}, fmt.Errorf("%v is not a multicast address (224.0.0.0/4 or ff00::/8)", g)
	}
	return netip.AddrFrom16(g.As16()), nil
}

// mcastGID returns the group this end attaches to: -M's, or perftest's
// default, whose last byte send-lat's client adds one to
// (set_multicast_gid).
func (s *session) mcastGID() netip.Addr {
	if s.o.mgidAddr.IsValid() {
		return s.o.mgidAddr
	}
	if s.client {
		b := defaultMGID.As16()
		b[15]++
		return netip.AddrFrom16(b)
	}
	return defaultMGID
}

// attachMcast attaches the QPs of send-bw's server, or of either end of
// send-lat, to the group and makes their key messages announce it, with
// QPN rxe.MulticastQPN (perftest's QPNUM_MCAST), as send_set_up_connection
// does.
func (s *session) attachMcast() error {
	if !s.o.mcg || s.client && !s.t.lat {
		return nil
	}
	g := s.mcastGID()
	if g.Unmap().Is4() != s.dev.Addr().Addr().Is4() {
		return fmt.Errorf("-g: the group %v is not of the device's IP version (%v): give -M a group of it (an IPv4 one such as 239.1.1.1, or --ipv6; perftest's default MGID is IPv6)", g, s.dev.Addr().Addr())
	}
	for i, qp := range s.qps {
		if err := qp.AttachMcast(g, 0); err != nil {
			return fmt.Errorf("attach QP %#x to multicast group %v: %w", qp.QPN(), g, err)
		}
		s.my[i].GID, s.my[i].QPN = g.As16(), rxe.MulticastQPN
	}
	return nil
}

// mcastPeer reports whether the peer's address may be a multicast group:
// in a -g run, send-bw's client and both ends of send-lat send to the
// group the other end announced.
func (s *session) mcastPeer() bool { return s.o.mcg && (s.client || s.t.lat) }
