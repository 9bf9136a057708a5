//go:build !linux

package perftest

import (
	"net"
	"syscall"
	"time"
)

// rawConn is nil: watchPeer peeks at the connection on Linux only.
func rawConn(net.Conn) syscall.RawConn { return nil }

// waitReadable is not used where rawConn is nil.
func waitReadable(syscall.RawConn) bool { return false }

// peerClosed is false: only Linux peeks at the connection.
func peerClosed(net.Conn) bool { return false }

// peekDone is false: only Linux peeks at the connection.
func peekDone(net.Conn, time.Duration) bool { return false }
