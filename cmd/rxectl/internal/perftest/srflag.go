package perftest

import (
	"fmt"

	"github.com/gorxe/gorxe/rxe"
)

// srOffFlag is --selective-repeat: on (the zero value: offer selective
// repeat to an rxectl peer) or off (offer nothing: the wire a kernel-rxe
// peer gets).
type srOffFlag bool

// String is "on" or "off".
func (f *srOffFlag) String() string {
	if f != nil && *f {
		return "off"
	}
	return "on"
}

// Set accepts on or off.
func (f *srOffFlag) Set(v string) error {
	switch v {
	case "on":
		*f = false
	case "off":
		*f = true
	default:
		return fmt.Errorf("--selective-repeat: %q is not on or off", v)
	}
	return nil
}

// srOffer reports whether this end offers selective repeat: with
// --selective-repeat=on, on RC QPs (UC and UD have no retransmission).
func (s *session) srOffer() bool { return !bool(s.o.noSR) && s.qpType() == rxe.QPTypeRC }

// srUsed reports whether the connection uses selective repeat: both ends
// offered it in the exchange of versions. perftest offers nothing.
func (s *session) srUsed() bool { return s.srOffer() && s.peer.SelectiveRepeat }

// srSummary is the header's selective-repeat line: the flag, then what
// was negotiated and why.
func (s *session) srSummary() string {
	switch {
	case s.srUsed():
		return fmt.Sprintf("%s, in use (the peer offers it too)", s.o.noSR.String())
	case !s.srOffer() && !bool(s.o.noSR):
		return "on, not in use (RC only)"
	case bool(s.o.noSR):
		return "off, not in use (go-back-N)"
	case !s.peer.RxeCtl:
		return "on, not in use (perftest offers nothing: go-back-N)"
	}
	return "on, not in use (the peer does not offer it: go-back-N)"
}

// srAttr adds the negotiated setting to an RC QP's INIT to RTR step.
func (s *session) srAttr(attr *rxe.QPAttr, mask *rxe.QPAttrMask) {
	if s.qpType() != rxe.QPTypeRC {
		return
	}
	attr.SelectiveRepeat = s.srUsed()
	*mask |= rxe.QPAttrSelectiveRepeat
}
