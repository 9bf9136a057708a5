package perftest

import (
	"context"
	"fmt"
	"time"

	"github.com/gorxe/gorxe/rxe"
)

// cqSet is the CQs a bandwidth loop serves: the session's one send (or
// receive) CQ with -q 1, one per QP with -q > 1. perftest gives all its
// QPs one send CQ and one receive CQ on completion vector 0; gorxe runs a
// QP's work on the vector of its receive CQ, so one CQ per QP, each on
// the least-used vector (CQAttr.Vector -1), spreads a multi-QP run over
// every vector, and with them over every core.
type cqSet struct {
	cqs []*rxe.CQ
	// ch receives the notifications of every CQ of the set when it has
	// more than one: the -e channel, or the set's own.
	ch   *rxe.CompChannel
	next int // the CQ polled first next time, so no QP's CQ starves
}

// poll moves completions of the set's CQs into wcs, taking the CQs in
// turn from the one after the last that was first, and returns how many.
func (c *cqSet) poll(wcs []rxe.WC) int {
	n := 0
	k := len(c.cqs)
	for j := range k {
		n += c.cqs[(c.next+j)%k].Poll(wcs[n:])
		if n == len(wcs) {
			break
		}
	}
	c.next = (c.next + 1) % k
	return n
}

// wait polls the set's CQs in turn and, when all are empty, arms each and
// sleeps on the set's channel until one of them completes or ctx is done.
// One goroutine serves every QP of the loop this way.
func (c *cqSet) wait(ctx context.Context, wcs []rxe.WC) (int, error) {
	for {
		if n := c.poll(wcs); n > 0 {
			return n, nil
		}
		// Notifications of earlier arms are stale: the poll below finds
		// what they announced.
		for drained := false; !drained; {
			select {
			case <-c.ch.C:
			default:
				drained = true
			}
		}
		for _, cq := range c.cqs {
			if err := cq.ReqNotify(false); err != nil {
				return 0, err
			}
		}
		if n := c.poll(wcs); n > 0 {
			return n, nil
		}
		select {
		case <-c.ch.C:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// waitCQsFor is waitCQs for at most d under ctx. Completions already
// queued are taken without a wait, so the deadline's context and timer
// are made only when the CQs are empty (made for every batch of
// completions, they took 0.7 % of the CPU samples of a 64 KiB write-bw on
// loopback).
func (s *session) waitCQsFor(ctx context.Context, set *cqSet, wcs []rxe.WC, d time.Duration) (int, error) {
	if n := set.poll(wcs); n > 0 {
		return n, nil
	}
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return s.waitCQs(wctx, set, wcs)
}

// waitCQs waits for completions on the CQs of set: as waitCQ with one CQ
// (-q 1), else by cqSet.wait.
func (s *session) waitCQs(ctx context.Context, set *cqSet, wcs []rxe.WC) (int, error) {
	if len(set.cqs) == 1 {
		return s.waitCQ(ctx, set.cqs[0], wcs)
	}
	return set.wait(ctx, wcs)
}

// cqSlack is the entries a CQ has beyond the depth of the queues it
// serves.
const cqSlack = 16

// createCQs makes the CQs of nq QPs. With one QP it makes one CQ for
// sends, and a second one for receives in a SEND test, as perftest does;
// so it does for all the QPs of an end whose QPs share an SRQ
// (--use-srq): a WQE of the SRQ goes to whichever QP a message comes to,
// so QPs on two completion vectors, handled by two goroutines at once,
// would write the same receive buffers at once. Otherwise each QP gets
// its own, with -R too (connectCMQPs hands them to Dial and AcceptFunc):
// the receive CQ on the least-used completion vector and the send CQ (the
// same CQ unless in a SEND test) on that vector too. With -X every CQ is
// on the vector it names, as perftest creates all its CQs on -X's.
func (s *session) createCQs(nq int) error {
	o := s.o
	if n := s.dev.Attr().NumCompVectors; o.cqVector >= n {
		return fmt.Errorf("-X %d: the device has %d completion vectors, 0 to %d (one per processor the Go runtime uses, GOMAXPROCS)", o.cqVector, n, n-1)
	}
	send := s.t.verb == verbSend
	if nq == 1 || o.useSRQ && s.receives() {
		if o.events {
			s.ch = rxe.NewCompChannel(4)
		}
		scq, err := s.dev.CreateCQWith(rxe.CQAttr{CQE: nq*o.txDepth + cqSlack, Vector: s.o.cqVector, Channel: s.ch})
		if err != nil {
			return err
		}
		rcq := scq
		if send {
			rch := s.ch
			if o.events && o.bidir {
				s.rch = rxe.NewCompChannel(4)
				rch = s.rch
			}
			if rcq, err = s.dev.CreateCQWith(rxe.CQAttr{CQE: nq*o.rxDepth + cqSlack, Vector: s.o.cqVector, Channel: rch}); err != nil {
				return err
			}
		}
		s.sset, s.rset = cqSet{cqs: []*rxe.CQ{scq}}, cqSet{cqs: []*rxe.CQ{rcq}}
		s.scq, s.rcq = scq, rcq
		return nil
	}
	// Each armed CQ sends at most one notification per arm, and cqSet.wait
	// drains its channel before arming: 2 per CQ never overflow.
	ncq := nq
	if send {
		ncq *= 2
	}
	sch, rch := rxe.NewCompChannel(2*nq), rxe.NewCompChannel(2*nq)
	if o.events {
		s.ch = rxe.NewCompChannel(2 * ncq)
		sch, rch = s.ch, s.ch
		if o.bidir && send {
			s.rch = rxe.NewCompChannel(2 * nq)
			rch = s.rch
		}
	}
	if !send {
		rch = sch // one CQ per QP for both
	}
	s.sset, s.rset = cqSet{ch: sch}, cqSet{ch: rch}
	for range nq {
		var err error
		var scq, rcq *rxe.CQ
		if send {
			if rcq, err = s.dev.CreateCQWith(rxe.CQAttr{CQE: o.rxDepth + cqSlack, Vector: s.o.cqVector, Channel: rch}); err != nil {
				return err
			}
			if scq, err = s.dev.CreateCQWith(rxe.CQAttr{CQE: o.txDepth + cqSlack, Vector: rcq.Vector(), Channel: sch}); err != nil {
				return err
			}
		} else {
			if scq, err = s.dev.CreateCQWith(rxe.CQAttr{CQE: o.txDepth + cqSlack, Vector: s.o.cqVector, Channel: sch}); err != nil {
				return err
			}
			rcq = scq
		}
		s.sset.cqs = append(s.sset.cqs, scq)
		s.rset.cqs = append(s.rset.cqs, rcq)
	}
	s.scq, s.rcq = s.sset.cqs[0], s.rset.cqs[0]
	return nil
}

// qpCQs returns the send and receive CQ of QP i.
func (s *session) qpCQs(i int) (scq, rcq *rxe.CQ) {
	return s.sset.cqs[i%len(s.sset.cqs)], s.rset.cqs[i%len(s.rset.cqs)]
}
