package rxe

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev"
)

// BenchmarkCQPollEmpty is the cost of one Poll of an empty CQ, what a
// busy-polling caller pays per spin: alone, and while another goroutine
// completes work on the same CQ and takes it back (push and Poll).
func BenchmarkCQPollEmpty(b *testing.B) {
	conn, _ := netdev.NewPipe()
	dev, err := Open(conn, Options{OwnConn: true})
	require.NoError(b, err)
	defer dev.Close()
	for _, busy := range []bool{false, true} {
		name := "alone"
		if busy {
			name = "busy"
		}
		b.Run(name, func(b *testing.B) {
			cq, err := dev.CreateCQ(16, -1)
			require.NoError(b, err)
			other, err := dev.CreateCQ(16, -1)
			require.NoError(b, err)
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() { // completes and takes back work on other
				defer close(done)
				wc, wcs := WC{Status: WCSuccess}, make([]WC, 1)
				for {
					select {
					case <-stop:
						return
					default:
					}
					if busy {
						cq.mu.Lock() // what push does on cq, without a completion
						cq.mu.Unlock()
						other.push(&wc, false)
						other.Poll(wcs)
					}
				}
			}()
			wcs := make([]WC, 1)
			for b.Loop() {
				if cq.Poll(wcs) != 0 {
					b.Fatal("a completion on an empty CQ")
				}
			}
			close(stop)
			<-done
		})
	}
}
