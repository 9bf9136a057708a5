package faults

import "github.com/gorxe/gorxe/netdev"

// Reading in turn (netdev.SharedReader). A device reads its netdev from its
// receive goroutine and, when a caller busy-polls a completion queue or a
// requester deadline comes, from other goroutines in turn
// (netdev.SharedReader). Without that the injector would change more than
// the packets: every read would wait for the receive goroutine. So a Conn
// reads in turn whenever its inner Conn can and its receive rules need no
// queue: with no receive rule the datagrams pass through untouched, and
// drop and corrupt rules decide each datagram in the reader's buffers, in
// arrival order under the gate, as ReadBatch decides them (readDirect), so
// a seed gives the same faults whichever goroutine reads. Rules that hold,
// delay or duplicate datagrams feed a queue from the pump goroutine; such
// a Conn does not read in turn (SharesReads is false).

// SharesReads reports whether the Conn's netdev.SharedReader methods may
// be used (netdev.AsSharedReader): the inner Conn reads in turn and every
// receive rule only drops or corrupts.
func (c *Conn) SharesReads() bool { return c.shared != nil }

// ReadBatchGated implements netdev.SharedReader when SharesReads is true
// (else it returns an error wrapping errors.ErrUnsupported). It
// returns holding gate when it returns datagrams; a batch the rules drop
// entirely is followed by further reads, as ReadBatch does.
func (c *Conn) ReadBatchGated(msgs []netdev.Message, gate *netdev.Gate) (int, error) {
	s := c.shared
	if s == nil {
		return 0, errNotShared
	}
	for {
		n, err := s.ReadBatchGated(msgs, gate)
		if err != nil || c.recv == nil || n == 0 {
			return n, err
		}
		// The gate is held: decide, and read on while everything read
		// was dropped.
		for {
			if n > 0 {
				k, err := c.recv.decideFill(s, c.inPlace, msgs, n)
				if k > 0 {
					return k, nil
				}
				if err != nil {
					gate.Release()
					return 0, err
				}
			}
			if n, err = s.TryReadBatch(msgs); err != nil {
				gate.Release()
				return 0, err
			}
			if n == 0 && !gate.Unlock() {
				break // released: wait for the next datagrams
			}
		}
	}
}

// TryReadBatch implements netdev.SharedReader when SharesReads is true: it
// never waits, and returns 0 with a nil error when nothing is there (or
// everything there was dropped). The caller holds the gate.
func (c *Conn) TryReadBatch(msgs []netdev.Message) (int, error) {
	s := c.shared
	if s == nil {
		return 0, errNotShared
	}
	for {
		n, err := s.TryReadBatch(msgs)
		if err != nil || n == 0 || c.recv == nil {
			return n, err
		}
		if k, err := c.recv.decideFill(s, c.inPlace, msgs, n); k > 0 || err != nil {
			return k, err
		}
	}
}

// decideFill decides msgs[:n], just read from s, and returns how many are
// kept (moved to the front). A reader that got a full batch reads again
// (with UDP GRO the rest of a coalesced buffer waits in the inner Conn,
// and no new arrival signals it: netdev.SharedReader), so when the inner
// Conn filled msgs and the rules dropped some, decideFill reads on into
// their room until msgs is full again or nothing more is there. It
// cannot when the inner Conn splits GRO buffers in place (inPlace): the
// kept datagrams then point into a buffer that the next read overwrites,
// so it reads on only while none is kept, and a batch it returns short
// may leave datagrams of a coalesced buffer in the inner Conn until the
// next read (the next arrival, or a requester deadline: rxe reads the
// socket before acting on one). An error after some datagrams were kept
// is left for the next read.
func (r *recvSide) decideFill(s netdev.SharedReader, inPlace bool, msgs []netdev.Message, n int) (int, error) {
	kept := 0
	for {
		full := n == len(msgs)-kept
		kept += r.decideDirect(msgs[kept : kept+n])
		if !full || kept == len(msgs) || kept > 0 && inPlace {
			return kept, nil
		}
		var err error
		if n, err = s.TryReadBatch(msgs[kept:]); err != nil {
			if kept > 0 {
				return kept, nil
			}
			return 0, err
		}
		if n == 0 {
			return kept, nil
		}
	}
}
