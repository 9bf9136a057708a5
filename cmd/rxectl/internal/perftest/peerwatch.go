package perftest

import (
	"context"
	"time"
)

// canWatchPeer reports whether watchPeer can watch this end's exchange:
// the watching it would return, without starting the watch.
func (s *session) canWatchPeer() bool {
	return s.cm != nil && s.cm.pipe != nil || s.conn != nil && rawConn(s.conn) != nil
}

// watchPeer watches the exchange's connection while this end receives
// the peer's SENDs (send-bw's server, and both ends with -b). The peer
// writes its next exchange message only once it has stopped sending
// (finished, or interrupted), and closes the connection when it fails, so
// data or an end waiting on the connection means no more messages are
// coming beyond those in flight. The returned context ends then (or when
// ctx ends); watching is false when this end cannot watch (an exchange
// that is not a TCP connection of this host's, and not -R's rdma_cm
// connection: cmPipe.watch), and stop ends the watch and waits for it,
// leaving the connection's data unread.
func (s *session) watchPeer(ctx context.Context) (spoke context.Context, watching bool, stop func()) {
	if s.cm != nil && s.cm.pipe != nil {
		spoke, stop := s.cm.pipe.watch(ctx)
		return spoke, true, stop
	}
	spoke, cancel := context.WithCancel(ctx)
	if s.conn == nil {
		return spoke, false, cancel
	}
	rc := rawConn(s.conn)
	if rc == nil {
		return spoke, false, cancel
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if waitReadable(rc) {
			cancel()
		}
	}()
	return spoke, true, func() {
		s.conn.SetReadDeadline(time.Unix(1, 0)) // wakes waitReadable
		<-done
		s.conn.SetReadDeadline(time.Time{})
		cancel()
	}
}
