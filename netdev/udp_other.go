//go:build !linux

package netdev

import (
	"errors"
	"fmt"
	"net/netip"
)

// UDPConn is a Conn over a UDP socket. It is implemented on Linux only;
// elsewhere ListenUDP returns an error wrapping errors.ErrUnsupported.
type UDPConn struct{}

// ListenUDP opens a UDP socket bound to addr (Linux only).
func ListenUDP(addr netip.AddrPort, opts Options) (*UDPConn, error) {
	return nil, fmt.Errorf("netdev: ListenUDP %v: %w", addr, errors.ErrUnsupported)
}

// BatchSize implements Conn.
func (c *UDPConn) BatchSize() int { return 0 }

// LocalAddr implements Conn.
func (c *UDPConn) LocalAddr() netip.AddrPort { return netip.AddrPort{} }

// BufferSizes reports the socket buffer sizes obtained at ListenUDP.
func (c *UDPConn) BufferSizes() BufferSizes { return BufferSizes{} }

// PagesTo reports whether datagrams to dst go out in page fragments
// (Linux only: false here).
func (c *UDPConn) PagesTo(dst netip.Addr) bool { return false }

// RunsTo reports whether runs of datagrams to dst go out as GSO buffers
// (Linux only: false here).
func (c *UDPConn) RunsTo(dst netip.Addr) bool { return false }

// GRO reports whether the socket has UDP_GRO on (Linux only: false here).
func (c *UDPConn) GRO() bool { return false }

// Stats returns a snapshot of the counters.
func (c *UDPConn) Stats() Stats { return Stats{} }

// Close implements Conn.
func (c *UDPConn) Close() error { return nil }

// ReportIPFields implements IPFieldReporter (Linux only).
func (c *UDPConn) ReportIPFields() error { return errors.ErrUnsupported }

// ReadBatch implements Conn.
func (c *UDPConn) ReadBatch(msgs []Message) (int, error) { return 0, errors.ErrUnsupported }

// WriteBatch implements Conn.
func (c *UDPConn) WriteBatch(msgs []Message) (int, error) { return 0, errors.ErrUnsupported }

// ReadBatchGated implements SharedReader (Linux only).
func (c *UDPConn) ReadBatchGated(msgs []Message, gate *Gate) (int, error) {
	return 0, errors.ErrUnsupported
}

// TryReadBatch implements SharedReader (Linux only).
func (c *UDPConn) TryReadBatch(msgs []Message) (int, error) { return 0, errors.ErrUnsupported }

// ListenUDPGroup opens n sockets steered by QPN (Linux only).
func ListenUDPGroup(addr netip.AddrPort, n int, opts Options) ([]*UDPConn, error) {
	return nil, fmt.Errorf("netdev: ListenUDPGroup %v: %w", addr, errors.ErrUnsupported)
}

// ListenMulticastUDP opens a socket that receives a multicast group (Linux
// only).
func ListenMulticastUDP(group netip.AddrPort, ifAddr netip.Addr, opts Options) (*UDPConn, error) {
	return nil, fmt.Errorf("netdev: ListenMulticastUDP %v: %w", group, errors.ErrUnsupported)
}

// ListenMulticast implements MulticastSender (Linux only).
func (c *UDPConn) ListenMulticast(group netip.AddrPort, ifAddr netip.Addr, opts Options) (*UDPConn, error) {
	return nil, fmt.Errorf("netdev: ListenMulticast %v: %w", group, errors.ErrUnsupported)
}

// SetMulticastSend implements MulticastSender (Linux only).
func (c *UDPConn) SetMulticastSend(ifAddr netip.Addr, hops uint8) error {
	return errors.ErrUnsupported
}
