package netdev

import (
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// ListenUDPGroup opens n UDP sockets bound to the same address with
// SO_REUSEPORT and steers every received datagram to one of them by the
// destination QP number of its RoCE BTH: a datagram for QPN q is received
// by conns[q % n]. The steering is a classic BPF program attached to the
// reuseport group (SO_ATTACH_REUSEPORT_CBPF); the kernel runs it on the UDP
// payload, whose bytes 5-7 are the BTH's DestQP (IBA 9.2), so every packet
// of a QP reaches the same socket whatever its source port, and the
// receive work of different QPs can run on different cores without a
// user-space dispatcher. A datagram too short to hold a BTH goes to
// conns[0].
//
// Port 0 means an ephemeral port, chosen by a plain bind (without
// SO_REUSEPORT) and then shared by the group. Any other port is first
// checked to be free the same way, so a group never joins sockets another
// program of the same user bound with SO_REUSEPORT; the check and the
// group's binds are not atomic, so a program binding the same port at the
// same instant can still join. n = 1 gives a single socket with
// SO_REUSEPORT and no program.
func ListenUDPGroup(addr netip.AddrPort, n int, opts Options) ([]*UDPConn, error) {
	if n < 1 || n > maxGroup {
		return nil, fmt.Errorf("netdev: ListenUDPGroup: %d sockets (want 1 to %d)", n, maxGroup)
	}
	// The probe is a plain bind (no SO_REUSEPORT): it fails if any socket
	// holds the port, and for port 0 it picks a port no socket holds.
	// Binding port 0 with SO_REUSEPORT would not: the kernel may hand out
	// a port that another reuseport group of the same user already has.
	probe, err := listenUDP(addr, Options{BatchSize: 1, RecvBuffer: -1, SendBuffer: -1, NoGSO: true, NoGRO: true}, false)
	if err != nil {
		if errors.Is(err, unix.EADDRINUSE) {
			return nil, fmt.Errorf("netdev: ListenUDPGroup: %v is in use: %w", addr, err)
		}
		return nil, fmt.Errorf("netdev: ListenUDPGroup: %v: %w", addr, err)
	}
	addr = netip.AddrPortFrom(addr.Addr(), probe.local.Port())
	probe.Close()
	conns := make([]*UDPConn, 0, n)
	fail := func(err error) ([]*UDPConn, error) {
		for _, c := range conns {
			c.Close()
		}
		return nil, err
	}
	for i := range n {
		c, err := listenUDP(addr, opts, true)
		if err != nil {
			return fail(fmt.Errorf("netdev: ListenUDPGroup socket %d of %d: %w", i+1, n, err))
		}
		conns = append(conns, c)
	}
	if n > 1 {
		prog := steerByQPN(uint32(n))
		fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
		var serr error
		if err := conns[0].rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptSockFprog(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF, &fprog)
		}); err != nil {
			serr = err
		}
		if serr != nil {
			return fail(fmt.Errorf("netdev: ListenUDPGroup: attach the steering program: %w", serr))
		}
	}
	return conns, nil
}

// maxGroup bounds ListenUDPGroup's n (the kernel's own limit on a
// reuseport group is 65535 sockets).
const maxGroup = 1024

// steerByQPN returns the reuseport program: A = payload[4:8] (the BTH's
// reserved byte and 24-bit DestQP, big endian, as cBPF loads words),
// A &= 0xFFFFFF, A %= n, return A (the index of the socket in the group, in
// bind order). A load beyond the datagram ends the program with 0.
func steerByQPN(n uint32) []unix.SockFilter {
	return []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 4},
		{Code: unix.BPF_ALU | unix.BPF_AND | unix.BPF_K, K: 0x00FFFFFF},
		{Code: unix.BPF_ALU | unix.BPF_MOD | unix.BPF_K, K: n},
		{Code: unix.BPF_RET | unix.BPF_A},
	}
}
