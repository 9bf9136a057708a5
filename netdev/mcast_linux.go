package netdev

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// ListenMulticastUDP opens a UDP socket that receives the datagrams sent
// to a multicast group: it is bound to group (the group's address and a
// port) and joins the group on the interface that carries ifAddr
// (IP_ADD_MEMBERSHIP, IPV6_JOIN_GROUP). An IPv6 group of interface-local
// or link-local scope (ff01::/16, ff02::/16) is bound with that interface
// as its scope, which Linux requires of such an address. Other sockets of
// the host may be bound to the same group and port, and each receives its
// own copy (SO_REUSEADDR); the socket receives no other group
// (IP_MULTICAST_ALL, IPV6_MULTICAST_ALL 0). A socket bound to a unicast
// address receives no multicast datagram, so a device bound to its own
// address needs one of these per group it receives. Closing the socket
// leaves the group. ReadBatch reports the group address as Message.Local.
// group must be an IPv4 (224.0.0.0/4, plain or IPv4-mapped) or IPv6
// (ff00::/8) multicast address of ifAddr's family. The socket, and the
// interface looked up, are those of the calling thread's network
// namespace.
func ListenMulticastUDP(group netip.AddrPort, ifAddr netip.Addr, opts Options) (*UDPConn, error) {
	g, a := group.Addr().Unmap(), ifAddr.Unmap()
	if !g.IsMulticast() {
		return nil, fmt.Errorf("netdev: ListenMulticastUDP: %v is not a multicast address", group.Addr())
	}
	if g.Is4() != a.Is4() {
		return nil, fmt.Errorf("netdev: ListenMulticastUDP: group %v and interface address %v are of different families", g, a)
	}
	ifi, err := interfaceIndexOf(a)
	if err != nil {
		return nil, fmt.Errorf("netdev: ListenMulticastUDP %v: %w", g, err)
	}
	bind := g
	if g.Is6() && (g.IsInterfaceLocalMulticast() || g.IsLinkLocalMulticast()) {
		// Linux binds an IPv6 address of these scopes only with a scope
		// ID (__inet6_bind, __ipv6_addr_needs_scope_id): the interface's.
		bind = g.WithZone(strconv.Itoa(ifi))
	}
	c, err := listenSetup(netip.AddrPortFrom(bind, group.Port()), opts, socketSetup{multicast: true})
	if err != nil {
		return nil, err
	}
	var serr error
	err = c.rc.Control(func(fd uintptr) {
		if g.Is4() {
			mreq := unix.IPMreqn{Multiaddr: g.As4(), Address: a.As4(), Ifindex: int32(ifi)}
			serr = unix.SetsockoptIPMreqn(int(fd), unix.IPPROTO_IP, unix.IP_ADD_MEMBERSHIP, &mreq)
			return
		}
		mreq := unix.IPv6Mreq{Multiaddr: g.As16(), Interface: uint32(ifi)}
		serr = unix.SetsockoptIPv6Mreq(int(fd), unix.IPPROTO_IPV6, unix.IPV6_JOIN_GROUP, &mreq)
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("netdev: ListenMulticastUDP: joining %v on interface %d (%v): %w", g, ifi, a, err)
	}
	return c, nil
}

// ListenMulticast implements MulticastSender: ListenMulticastUDP in the
// network namespace of c's socket, whichever namespace the calling thread
// is in (a device opened in another namespace joins its groups there).
func (c *UDPConn) ListenMulticast(group netip.AddrPort, ifAddr netip.Addr, opts Options) (*UDPConn, error) {
	var g *UDPConn
	err := inNetnsOf(c.rc, func() (err error) { g, err = ListenMulticastUDP(group, ifAddr, opts); return err })
	return g, err
}

// SetMulticastSend implements MulticastSender: the socket's multicast
// datagrams leave by the interface that carries ifAddr
// (IP_MULTICAST_IF, IPV6_MULTICAST_IF) with hops as their IPv4 TTL or
// IPv6 hop limit (IP_MULTICAST_TTL, IPV6_MULTICAST_HOPS), and a copy of
// each is delivered to the sockets of this host that joined the group
// (IP_MULTICAST_LOOP, IPV6_MULTICAST_LOOP). The interface is the socket's
// network namespace's, whichever namespace the calling thread is in.
func (c *UDPConn) SetMulticastSend(ifAddr netip.Addr, hops uint8) error {
	a := ifAddr.Unmap()
	if a.Is4() == c.v6 {
		return fmt.Errorf("netdev: SetMulticastSend: interface address %v is not of the socket's family", ifAddr)
	}
	var ifi int
	err := inNetnsOf(c.rc, func() (err error) { ifi, err = interfaceIndexOf(a); return err })
	if err != nil {
		return fmt.Errorf("netdev: SetMulticastSend: %w", err)
	}
	var serr error
	err = c.rc.Control(func(fd uintptr) {
		f := int(fd)
		if c.v6 {
			serr = setIntOpts(f, []intOpt{
				{"IPV6_MULTICAST_IF", unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_IF, ifi},
				{"IPV6_MULTICAST_HOPS", unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_HOPS, int(hops)},
				{"IPV6_MULTICAST_LOOP", unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_LOOP, 1},
			})
			return
		}
		mreq := unix.IPMreqn{Address: a.As4(), Ifindex: int32(ifi)}
		if serr = unix.SetsockoptIPMreqn(f, unix.IPPROTO_IP, unix.IP_MULTICAST_IF, &mreq); serr != nil {
			serr = fmt.Errorf("setsockopt IP_MULTICAST_IF: %w", serr)
			return
		}
		serr = setIntOpts(f, []intOpt{
			{"IP_MULTICAST_TTL", unix.IPPROTO_IP, unix.IP_MULTICAST_TTL, int(hops)},
			{"IP_MULTICAST_LOOP", unix.IPPROTO_IP, unix.IP_MULTICAST_LOOP, 1},
		})
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("netdev: SetMulticastSend via %v: %w", a, err)
	}
	return nil
}

// interfaceIndexOf returns the index of the interface that carries the
// address a: the one a's zone names (a link-local IPv6 address, whose
// zone is an interface name or index), else the one a is assigned to, or
// else the one whose network holds a (127.0.0.2 is lo's, whose address is
// 127.0.0.1/8). Interfaces are those of the calling thread's network
// namespace.
func interfaceIndexOf(a netip.Addr) (int, error) {
	if z := a.Zone(); z != "" {
		if n, err := strconv.ParseUint(z, 10, 31); err == nil && n > 0 {
			return int(n), nil
		}
		ifi, err := net.InterfaceByName(z)
		if err != nil {
			return 0, fmt.Errorf("the zone of %v: %w", a, err)
		}
		return ifi.Index, nil
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return 0, fmt.Errorf("listing interfaces: %w", err)
	}
	within := -1
	var listErr error // the first interface whose addresses could not be listed
	for _, ifi := range ifs {
		addrs, err := ifi.Addrs()
		if err != nil {
			if listErr == nil {
				listErr = fmt.Errorf("listing the addresses of %s: %w", ifi.Name, err)
			}
			continue
		}
		for _, x := range addrs {
			n, ok := x.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(n.IP)
			if !ok {
				continue
			}
			if ip.Unmap() == a {
				return ifi.Index, nil
			}
			if ones, _ := n.Mask.Size(); within < 0 && netip.PrefixFrom(ip.Unmap(), ones).Contains(a) {
				within = ifi.Index
			}
		}
	}
	if within >= 0 {
		return within, nil
	}
	if listErr != nil {
		return 0, fmt.Errorf("no interface carries %v (%v)", a, listErr)
	}
	return 0, fmt.Errorf("no interface carries %v", a)
}

// bindGroup opens a UDP socket with the options of setup bound to the
// multicast group and port bind, an IPv6 group's zone (an interface name
// or index) as its scope ID. net.ListenPacket cannot: given a
// multicast address it binds the wildcard address, and such a socket
// receives the unicast datagrams to every address of the host at its port
// that no socket bound to the address takes.
func bindGroup(bind netip.AddrPort, setup *socketSetup) (net.PacketConn, error) {
	family := unix.AF_INET
	if setup.v6 {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	f := os.NewFile(uintptr(fd), "udp-multicast")
	defer f.Close() // net.FilePacketConn works on a duplicate
	var sa unix.Sockaddr
	if setup.v6 {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
			return nil, fmt.Errorf("setsockopt IPV6_V6ONLY: %w", err)
		}
		var scope uint32
		if z := bind.Addr().Zone(); z != "" {
			if scope = zones.index(z); scope == 0 {
				return nil, fmt.Errorf("no interface %q (the zone of %v)", z, bind.Addr())
			}
		}
		sa = &unix.SockaddrInet6{Port: int(bind.Port()), Addr: bind.Addr().As16(), ZoneId: scope}
	} else {
		sa = &unix.SockaddrInet4{Port: int(bind.Port()), Addr: bind.Addr().As4()}
	}
	if err := setup.apply(fd); err != nil {
		return nil, err
	}
	if err := unix.Bind(fd, sa); err != nil {
		return nil, fmt.Errorf("bind: %w", err)
	}
	return net.FilePacketConn(f)
}
