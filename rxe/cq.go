package rxe

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gorxe/gorxe/internal/ring"
)

// CompChannel delivers completion notifications (ibv_comp_channel): a CQ
// armed with ReqNotify sends itself on C at its next completion. A channel
// serves the CQs of one device, as an ibv_comp_channel belongs to one
// context: the first CQ created with it binds it to its device. Make one
// with NewCompChannel; CreateCQWith refuses the zero CompChannel.
//
// C is never closed, so a goroutine that only receives from C cannot see
// its device close. Get, like ibv_get_cq_event, waits for the next
// notification and ends with ErrClosed once the device is closed (or with
// ctx's error); a loop that reads C itself should also select on a signal
// of its own.
type CompChannel struct {
	// C receives the CQ whose armed notification fired. It is
	// receive-only, as time.Timer's C: the device sends on it (c).
	C <-chan *CQ
	c chan *CQ

	mu    sync.Mutex    // protects dev and bound
	dev   *Device       // the device of its CQs, set by the first CreateCQWith
	bound chan struct{} // closed when dev is set
}

// NewCompChannel returns a completion channel that can hold depth pending
// notifications (at least 1); a notification that finds it full is dropped
// and counted, never blocks the device.
func NewCompChannel(depth int) *CompChannel {
	c := make(chan *CQ, max(depth, 1))
	return &CompChannel{C: c, c: c, bound: make(chan struct{})}
}

// Get returns the next CQ whose notification fired (ibv_get_cq_event). It
// blocks until one does, ctx is done (ctx.Err()), or the device of the
// channel's CQs is closed: then it returns ErrClosed, once the
// notifications sent by then (those of Device.Close's flush completions
// included) have been taken. A Get that began before the channel's first
// CQ was created follows that CQ's device.
func (ch *CompChannel) Get(ctx context.Context) (*CQ, error) {
	ch.mu.Lock()
	d := ch.dev
	ch.mu.Unlock()
	if d == nil {
		select {
		case cq := <-ch.C:
			return cq, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ch.bound:
			ch.mu.Lock()
			d = ch.dev
			ch.mu.Unlock()
		}
	}
	select {
	case cq := <-ch.C:
		return cq, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-d.stopped:
		// Close has pushed its flush completions, and sent their
		// notifications, before it closed stopped.
		select {
		case cq := <-ch.C:
			return cq, nil
		default:
			return nil, ErrClosed
		}
	}
}

// bind binds the channel to d, the device of a CQ being created with it,
// or refuses a CQ of another device than its first CQ's (uverbs finds a
// CQ's completion channel among its own context's files).
func (ch *CompChannel) bind(d *Device) error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	switch ch.dev {
	case nil:
		ch.dev = d
		close(ch.bound)
	case d:
	default:
		return fmt.Errorf("%w: the completion channel serves the CQs of device %s", ErrInvalidArgument, ch.dev.Name())
	}
	return nil
}

// CQAttr describes a CQ to create.
type CQAttr struct {
	// CQE is the minimum number of completions the CQ holds.
	CQE int
	// Vector is the completion vector that services the CQ; -1 picks the
	// least-used vector.
	Vector int
	// Channel, if non-nil, receives the CQ when an armed notification
	// fires. It must not serve CQs of another device (ErrInvalidArgument).
	Channel *CompChannel
}

// CQ is a completion queue.
type CQ struct {
	dev    *Device
	vector int
	ch     *CompChannel

	mu            sync.Mutex    // protects the fields below
	wcs           ring.Ring[WC] // grows up to cqe only as completions wait in it
	armed         bool
	solicitedOnly bool
	overflowed    bool // CQ_ERR raised for an overflow; cleared when Poll makes room
	destroyed     bool

	// queued mirrors wcs.Len(), written under mu: Poll on an empty CQ
	// reads it and returns without taking mu, so a caller that spins on
	// Poll does not contend with the goroutine completing work.
	queued atomic.Int32

	// busy is set by the first BusyPoll: PostSend on the CQ's QPs then
	// sends on the poster's goroutine (busypoll.go).
	busy atomic.Bool
	// wakePending is set while the CQ waits in Device.wakes for the end
	// of a batch to wake its Wait (wakeWaiter).
	wakePending atomic.Bool
	// woken is set when Device.endBatch wakes the CQ's waiter and cleared
	// when completions are next taken (Poll): while it is set with
	// completions queued, the consumer has not run since it was woken.
	// sendWC is set when a send queue's completion is queued and cleared
	// with woken.
	woken, sendWC atomic.Bool

	// unsent is set when a BusyPoll handled datagrams and left the packets
	// they made ready for the next BusyPoll (or a PostSend) to send.
	unsent atomic.Bool
	// readers are the socket readers of the vectors of the QPs using the
	// CQ, for BusyPoll (written under mu, copied on write).
	readers atomic.Pointer[[]*connReader]

	wake  chan struct{} // 1-slot: a completion arrived (for Wait)
	dead  chan struct{} // closed by Destroy: ends every Wait
	users atomic.Int32  // QPs using this CQ (taken under mu by use)
}

// maxCQE is the largest CQ, the device's MaxCQE. It is gorxe's own bound,
// eight times kernel rxe's max_cqe of 2^15 - 1 (rxe_init_device_param), so
// a program that sizes its CQs from DeviceAttr.MaxCQE can ask here for
// more than an rxe device gives it.
const maxCQE = 1 << 18

// CreateCQ creates a completion queue for at least cqe completions on
// completion vector vector (-1: the least used).
func (d *Device) CreateCQ(cqe, vector int) (*CQ, error) {
	return d.CreateCQWith(CQAttr{CQE: cqe, Vector: vector})
}

// CreateCQWith creates a completion queue.
func (d *Device) CreateCQWith(attr CQAttr) (*CQ, error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	if attr.CQE < 1 || attr.CQE > maxCQE {
		return nil, fmt.Errorf("%w: cqe %d not in [1, %d]", ErrInvalidArgument, attr.CQE, maxCQE)
	}
	if attr.Channel != nil && attr.Channel.c == nil {
		return nil, fmt.Errorf("%w: a completion channel not made by NewCompChannel", ErrInvalidArgument)
	}
	if err := d.take(&d.nCQ, d.attr.MaxCQ, "completion queues"); err != nil {
		return nil, err
	}
	v, err := d.pickVector(attr.Vector)
	if err != nil {
		d.nCQ.Add(-1)
		return nil, err
	}
	if attr.Channel != nil {
		if err := attr.Channel.bind(d); err != nil {
			d.releaseVector(v)
			d.nCQ.Add(-1)
			return nil, err
		}
	}
	cq := &CQ{dev: d, vector: v, ch: attr.Channel, wake: make(chan struct{}, 1), dead: make(chan struct{})}
	cq.wcs.Init(attr.CQE, nil)
	return cq, nil
}

// Vector returns the completion vector servicing the CQ.
func (cq *CQ) Vector() int { return cq.vector }

// Cap returns the number of completions the CQ holds.
func (cq *CQ) Cap() int { return cq.wcs.Max() }

// Poll moves up to len(wcs) completions into wcs, oldest first, and
// returns how many. It never blocks; on an empty CQ it costs one atomic
// load and takes no lock, so busy-polling it (as perftest spins on
// ibv_poll_cq) is cheap.
func (cq *CQ) Poll(wcs []WC) int {
	if cq.queued.Load() == 0 {
		return 0
	}
	cq.mu.Lock()
	k := 0
	for k < len(wcs) && cq.wcs.Len() > 0 {
		wcs[k] = *cq.wcs.Front()
		cq.wcs.Pop()
		k++
	}
	if k > 0 {
		// Room again: the next overflow raises its own CQ_ERR. One
		// overflow (completions refused until a Poll takes one) raises
		// one; rxe_cq_post raises one at every completion it refuses.
		cq.overflowed = false
	}
	cq.queued.Add(int32(-k))
	cq.mu.Unlock()
	if cq.woken.Load() {
		cq.woken.Store(false)
	}
	if cq.sendWC.Load() {
		cq.sendWC.Store(false)
	}
	return k
}

// Wait polls like Poll but blocks until at least one completion is there,
// ctx is done (it returns ctx.Err()), or the CQ is destroyed or its device
// closed (ErrClosed, once the completions queued by then, the flush
// completions of Device.Close included, have been taken). Completions made
// while the device handles a batch of received datagrams wake it once,
// when the batch has been handled, so that it returns them together.
func (cq *CQ) Wait(ctx context.Context, wcs []WC) (int, error) {
	if len(wcs) == 0 {
		return 0, fmt.Errorf("%w: empty slice", ErrInvalidArgument)
	}
	for {
		if n := cq.Poll(wcs); n > 0 {
			if cq.queued.Load() > 0 {
				// Completions are left for another waiter: one wake-up
				// (endBatch's, once per batch) reaches one waiter, so
				// hand it on.
				select {
				case cq.wake <- struct{}{}:
				default:
				}
			}
			return n, nil
		}
		cq.mu.Lock()
		dead := cq.destroyed
		cq.mu.Unlock()
		if dead {
			return 0, ErrClosed
		}
		select {
		case <-cq.wake:
		case <-cq.dead:
			return 0, ErrClosed
		case <-cq.dev.stopped:
			if n := cq.Poll(wcs); n > 0 {
				return n, nil
			}
			return 0, ErrClosed
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// ReqNotify arms a one-shot notification (ibv_req_notify_cq): the CQ is
// sent on its CompChannel at the next completion, or with solicitedOnly at
// the next solicited receive completion or error completion. A CQ already
// armed for the next completion stays so until it fires. It fails with
// ErrInvalidState on a CQ created without a CompChannel (CQAttr.Channel),
// and with ErrClosed on a destroyed CQ or after Device.Close.
func (cq *CQ) ReqNotify(solicitedOnly bool) error {
	if cq.ch == nil {
		return fmt.Errorf("%w: CQ has no completion channel", ErrInvalidState)
	}
	cq.mu.Lock()
	defer cq.mu.Unlock()
	// After Device.Close no completion comes (its flushes are queued by
	// the time Close returns): an arm would never fire.
	if cq.destroyed || cq.dev.closed.Load() {
		return ErrClosed
	}
	// An arm for the next completion is not narrowed to solicited-only
	// by a later request before it fires; the other way round widens it
	// (IBA 11.4.2.2, C11-31 and C11-32; rxe_req_notify_cq keeps
	// IB_CQ_NEXT_COMP).
	if !cq.armed || cq.solicitedOnly {
		cq.solicitedOnly = solicitedOnly
	}
	cq.armed = true
	return nil
}

// Destroy destroys the CQ. It fails with ErrInUse while QPs use it, and
// with ErrClosed after Device.Close or a first Destroy.
func (cq *CQ) Destroy() error {
	if cq.dev.closed.Load() {
		return ErrClosed
	}
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.destroyed {
		return ErrClosed
	}
	// users changes under mu only upward (use), so a QP cannot take the
	// CQ between this check and destroyed being set.
	if n := cq.users.Load(); n > 0 {
		return fmt.Errorf("%w: the CQ is the send or receive CQ of QPs still there (%d uses: a QP's send and receive queues count one each); destroy them first", ErrInUse, n)
	}
	cq.destroyed = true
	cq.dev.nCQ.Add(-1)
	cq.dev.releaseVector(cq.vector)
	close(cq.dead) // every Wait returns, not only the one a wake token would reach
	return nil
}

// use takes the CQ for a new QP: it fails with ErrClosed once the CQ is
// destroyed (the QP's completions would have nowhere to go).
func (cq *CQ) use() error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.destroyed {
		return fmt.Errorf("%w: the CQ is destroyed", ErrClosed)
	}
	cq.users.Add(1)
	return nil
}

// Len returns the number of completions waiting.
func (cq *CQ) Len() int {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	return cq.wcs.Len()
}

// cqSink adapts a CQ to the Completions interfaces of requester and
// responder; solicited marks receive completions of solicited messages.
type cqSink struct{ cq *CQ }

// Complete implements requester.Completions and responder.Completions.
func (s cqSink) Complete(wc *WC) bool { return s.cq.push(wc, false) }

// CompleteSolicited implements responder.SolicitedCompletions: a receive
// completion with the request's SE bit, for solicited-only notification.
func (s cqSink) CompleteSolicited(wc *WC, solicited bool) bool { return s.cq.push(wc, solicited) }

// push appends wc; it returns false if the CQ is full (overflow: the
// caller moves the QP to ERR and the device raises CQ_ERR, once until
// Poll takes completions from the CQ).
func (cq *CQ) push(wc *WC, solicited bool) bool {
	cq.mu.Lock()
	var slot *WC
	if !cq.destroyed {
		slot = cq.wcs.Push()
	}
	if slot == nil {
		first := !cq.overflowed
		cq.overflowed = true
		cq.mu.Unlock()
		if first {
			cq.dev.raise(AsyncEvent{Type: EventCQErr, CQ: cq})
		}
		return false
	}
	*slot = *wc
	if !wc.Opcode.IsRecv() && !cq.sendWC.Load() {
		cq.sendWC.Store(true)
	}
	if q := cq.queued.Add(1); int(q) > cq.wcs.Max()/2 && cq.dev.batches.Load() > 0 {
		cq.dev.behind.Store(true)
	}
	// A solicited-only arm fires on a solicited receive completion or an
	// error completion (IBA 11.4.2.2).
	fire := cq.armed && (!cq.solicitedOnly || solicited || wc.Status != WCSuccess)
	if fire {
		cq.armed = false
	}
	cq.mu.Unlock()
	cq.wakeWaiter()
	if fire {
		select {
		case cq.ch.c <- cq:
		default:
			cq.dev.counters.notifyDropped.Add(1)
		}
	}
	return true
}

// wakeWaiter wakes a goroutine sleeping in Wait: at once, or, while a
// receive goroutine (or a busy poller) of the device is handling a batch of
// datagrams, when the batch is handled (Device.endBatch). A batch of
// SENDs completes a receive per message; woken per completion, the waiter
// ran once per message on the other processor and contended for the QP
// with the goroutine completing them (docs/performance.md, "Waking CQ
// waiters once per batch"). A waiter woken a batch late still finds every
// completion: Wait polls before it sleeps again.
func (cq *CQ) wakeWaiter() {
	if cq.wakePending.Load() {
		return // it is in Device.wakes: endBatch wakes it
	}
	if d := cq.dev; d.batches.Load() > 0 {
		d.wakeMu.Lock()
		deferred := d.batches.Load() > 0
		if deferred && !cq.wakePending.Swap(true) {
			d.wakes = append(d.wakes, cq)
		}
		d.wakeMu.Unlock()
		if deferred {
			return
		}
	}
	select {
	case cq.wake <- struct{}{}:
	default:
	}
}
