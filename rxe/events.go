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
func (d *Device) Events() <-chan AsyncEvent { return d.events }

func (d *Device) raise(e AsyncEvent) {
	select {
	case d.events <- e:
	default:
		d.counters.eventsDropped.Add(1)
	}
}
