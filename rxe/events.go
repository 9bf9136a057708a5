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

// Async event types (re-exported from rxe/verbs).
const (
	EventCQErr            = verbs.EventCQErr
	EventQPFatal          = verbs.EventQPFatal
	EventSQDrained        = verbs.EventSQDrained
	EventSRQLimitReached  = verbs.EventSRQLimitReached
	EventQPLastWQEReached = verbs.EventQPLastWQEReached
)

// Events delivers asynchronous events. Events that find it full are
// dropped and counted (Counters.EventsDropped).
func (d *Device) Events() <-chan AsyncEvent { return d.events }

func (d *Device) raise(e AsyncEvent) {
	select {
	case d.events <- e:
	default:
		d.counters.eventsDropped.Add(1)
	}
}
