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
		silent.Store(p.watch(done, t.C, p.heard))
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

// watch ends the Recv under way (a read deadline in the past) once heard
// has not moved for p.silence, looking at each tick; it returns when done
// is closed, or once it has ended the Recv, reporting which. The silence
// runs from when heard was read, not from when the tick was due: a
// watcher that runs late (a loaded host) reads a tick due long before,
// and dating the packets it then sees to that tick would end the wait
// with less than p.silence of silence (cmPipe.watchQuiet's rule too).
func (p *silentPipe) watch(done <-chan struct{}, tick <-chan time.Time, heard func() uint64) bool {
	was, last := heard(), time.Now()
	for {
		select {
		case <-done:
			return false
		case <-tick:
			before := time.Now()
			if h := heard(); h != was {
				was, last = h, time.Now()
			} else if before.Sub(last) >= p.silence {
				p.conn.SetReadDeadline(time.Unix(1, 0))
				return true
			}
		}
	}
}
