package perftest

import (
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/oob"
)

// silentPipe bounds each Recv of the TCP exchange after the setup
// exchanges, as cmPipe.wait bounds -R's: a Recv fails once no byte has
// come and no packet has gone to or come from the peer on the test QPs
// for silence (a peer stopped with SIGSTOP, a host gone with TCP still up,
// a peer that sent part of a message). A server waiting out its client's
// run keeps waiting as long as the client's requests arrive.
type silentPipe struct {
	oob.Pipe
	conn    net.Conn
	s       *session
	silence time.Duration
	armed   atomic.Bool // set once the setup deadline is lifted
}

// errExchangeSilent is silentPipe's error: nothing moved for d.
type errExchangeSilent struct{ d time.Duration }

func (e errExchangeSilent) Error() string {
	return fmt.Sprintf("the peer sent nothing on the exchange and no packet came from or went to it for %v (stopped, or its host or path is gone)", e.d)
}

// heard returns the packets the test QPs have received and sent so far.
func (p *silentPipe) heard() uint64 {
	var n uint64
	for _, qp := range p.s.qps {
		c := qp.Counters()
		n += c.RcvdPkts + c.SentPkts
	}
	return n
}

// Recv is the pipe's Recv, ended by a read deadline in the past once
// neither the exchange nor the test QPs have moved for p.silence.
func (p *silentPipe) Recv(b []byte) error {
	if !p.armed.Load() {
		return p.Pipe.Recv(b)
	}
	done, exited := make(chan struct{}), make(chan struct{})
	var silent atomic.Bool
	go func() {
		defer close(exited)
		t := time.NewTicker(min(p.silence/4, time.Second))
		defer t.Stop()
		heard, last := p.heard(), time.Now()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				// The clock read now, not the tick's due time: a watcher
				// that runs late would date the packets it counts to an
				// old tick and end the wait with less silence than
				// p.silence (watchQuiet's rule too).
				now := time.Now()
				if h := p.heard(); h != heard {
					heard, last = h, now
				} else if now.Sub(last) >= p.silence {
					silent.Store(true)
					p.conn.SetReadDeadline(time.Unix(1, 0))
					return
				}
			}
		}
	}()
	err := p.Pipe.Recv(b)
	close(done)
	<-exited // no deadline is set after this
	if silent.Load() {
		p.conn.SetReadDeadline(time.Time{})
		if err != nil {
			return errExchangeSilent{p.silence}
		}
	}
	return err
}
