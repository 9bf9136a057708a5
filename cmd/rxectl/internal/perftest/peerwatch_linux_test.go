package perftest

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/oob"
)

// tcpPair returns the two ends of a TCP connection over the loopback.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	select {
	case server = <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("no connection accepted")
	}
	require.NotNil(t, server)
	t.Cleanup(func() { server.Close() })
	return client, server
}

// TestPeerLeftWithDataBuffered: the server's end of the exchange tells
// that its peer left (peerClosed, peerLeft) when the peer closed after a
// key message that the server has not read yet, as an interrupted
// latency client does, and reads nothing doing so. A peer that wrote its
// key message and keeps the connection open (its run finished) has not
// left, and neither has one that wrote nothing.
func TestPeerLeftWithDataBuffered(t *testing.T) {
	key := oob.KeyMsg{QPN: 0x11, PSN: 0x123456, RKey: 0x1234, VAddr: 0x7f0000001000}.Marshal()
	tests := []struct {
		name   string
		write  bool
		close  bool
		closed bool
	}{
		{"nothing written, open", false, false, false},
		{"key message, open", true, false, false},
		{"nothing written, closed", false, true, true},
		{"key message, closed", true, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client, server := tcpPair(t)
			if tc.write {
				_, err := client.Write(key)
				require.NoError(t, err)
			}
			if tc.close {
				require.NoError(t, client.Close())
			}
			// The loopback delivers at once; allow the FIN a bounded moment.
			deadline := time.Now().Add(2 * time.Second)
			for tc.closed && !peerClosed(server) && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			require.Equal(t, tc.closed, peerClosed(server))
			s := &session{conn: server}
			require.Equal(t, tc.closed, s.peerLeft())
			if tc.write {
				// Nothing was read: the key message is still there.
				require.NoError(t, server.SetReadDeadline(time.Now().Add(2*time.Second)))
				got := make([]byte, len(key))
				_, err := io.ReadFull(server, got)
				require.NoError(t, err)
				require.Equal(t, key, got)
			}
		})
	}
}
