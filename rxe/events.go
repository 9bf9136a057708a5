package rxe

import (
	"github.com/gorxe/gorxe/rxe/verbs"
)

// AsyncEvent is an asynchronous event (struct ibv_async_event): one of QP,
// CQ or SRQ is set, depending on the type.
type AsyncEvent struct {
	Type AsyncEventType
	QP   *QP
	CQ   *CQ
	SRQ  *SRQ
}

// Async event types (re-exported from rxe/verbs). gorxe raises CQ_ERR,
// QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR, SQ_DRAINED, SRQ_LIMIT_REACHED and
// QP_LAST_WQE_REACHED; the others complete the enum.
const (
	EventCQErr            = verbs.EventCQErr
	EventQPFatal          = verbs.EventQPFatal
	EventQPReqErr         = verbs.EventQPReqErr
	EventQPAccessErr      = verbs.EventQPAccessErr
	EventCommEst          = verbs.EventCommEst
	EventSQDrained        = verbs.EventSQDrained
	EventPathMig          = verbs.EventPathMig
	EventPathMigErr       = verbs.EventPathMigErr
	EventDeviceFatal      = verbs.EventDeviceFatal
	EventPortActive       = verbs.EventPortActive
	EventPortErr          = verbs.EventPortErr
	EventLIDChange        = verbs.EventLIDChange
	EventPKeyChange       = verbs.EventPKeyChange
	EventSMChange         = verbs.EventSMChange
	EventSRQErr           = verbs.EventSRQErr
	EventSRQLimitReached  = verbs.EventSRQLimitReached
	EventQPLastWQEReached = verbs.EventQPLastWQEReached
	EventClientReregister = verbs.EventClientReregister
	EventGIDChange        = verbs.EventGIDChange
)

// Events delivers asynchronous events. Events that find it full are
// dropped and counted (Counters.EventsDropped).
//
// Device.Close closes the channel once it has stopped every QP: a
// receiver gets every event raised before then that found room (the
// QP_LAST_WQE_REACHED and CQ_ERR events of Close's own flushes included)
// and then sees the channel closed, so that
//
//	for e := range d.Events() { ... }
//
// ends after Close. A receive that is not a range must check ok
// (e, ok := <-d.Events()): the zero AsyncEvent of a closed channel reads
// as a CQ_ERR with no CQ. An event raised later (none is, once Close has
// stopped the QPs) is dropped and counted, never sent on the closed
// channel. Like ibv_get_async_event's file, the channel is the device's:
// the same channel is returned every time.
func (d *Device) Events() <-chan AsyncEvent { return d.events }

// raise queues e on Events without blocking. evMu orders it with
// closeEvents: no event is sent on the closed channel.
func (d *Device) raise(e AsyncEvent) {
	d.evMu.Lock()
	defer d.evMu.Unlock()
	if d.evClosed {
		d.counters.eventsDropped.Add(1)
		return
	}
	select {
	case d.events <- e:
	default:
		d.counters.eventsDropped.Add(1)
	}
}

// closeEvents closes Events (Device.Close, once every QP is stopped); the
// events queued stay for the receiver.
func (d *Device) closeEvents() {
	d.evMu.Lock()
	defer d.evMu.Unlock()
	d.evClosed = true
	close(d.events)
}
