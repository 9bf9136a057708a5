package perftest

import (
	"fmt"
	"net/netip"

	"github.com/gorxe/gorxe/rxe"
)

// udQKey is perftest's DEF_QKEY, the Q_Key of its UD QPs.
const udQKey = 0x11111111

// recvSize is the receive buffer for a message of size bytes: UD buffers
// start with the 40-byte GRH area (perftest's UD_ADDITION).
func (s *session) recvSize(size int) int {
	if s.o.connType == "UD" {
		return size + rxe.GRHSize
	}
	return size
}

// limitUD holds a UD test's message size to the path MTU as perftest's
// check_mtu does: a size given with -s above the MTU is refused; the
// default size, and the largest size of -a, are cut to the MTU with a
// note on stderr.
func (s *session) limitUD() error {
	o := s.o
	if o.connType != "UD" {
		return nil
	}
	o.udMTU = s.mtu.Bytes()
	if !o.all && o.size <= o.udMTU {
		return nil
	}
	if !o.all && o.set["size"] {
		return fmt.Errorf("-s %d: a UD message is at most the path MTU, %d bytes", o.size, o.udMTU)
	}
	// A --loopback run's two ends share one command line and one MTU:
	// the client's note says it for both.
	if s.client || !s.o.loopback {
		fmt.Fprintf(s.errw, " Max msg size in UD is MTU %d\n Changing to this MTU\n", o.udMTU)
	}
	if !o.all {
		o.size = o.udMTU
	}
	return nil
}

// connectUD takes the UD QPs to RTS (ctx_connect for UD: INIT with the
// Q_Key, RTR, RTS with the SQ PSN) and makes the address handle of each
// peer QP.
func (s *session) connectUD() error {
	for i, qp := range s.qps {
		rem, my := s.rem[i], s.my[i]
		dgid := netip.AddrFrom16(rem.GID).Unmap()
		steps := []qpStep{
			{rxe.QPAttr{State: rxe.QPSInit, Port: 1, QKey: udQKey}, rxe.QPAttrState | rxe.QPAttrPKeyIndex | rxe.QPAttrPort | rxe.QPAttrQKey},
			{rxe.QPAttr{State: rxe.QPSRTR}, rxe.QPAttrState},
			{rxe.QPAttr{State: rxe.QPSRTS, SQPSN: my.PSN}, rxe.QPAttrState | rxe.QPAttrSQPSN},
		}
		if err := modifySteps(qp, steps); err != nil {
			return fmt.Errorf("ready UD QP %#x: %w", qp.QPN(), err)
		}
		ah, err := s.pd.CreateAH(rxe.AH{DGID: dgid, UDPPort: s.peerAddr.Port(), HopLimit: 0xFF})
		if err != nil {
			return fmt.Errorf("address handle of %v: %w", dgid, err)
		}
		s.ahs = append(s.ahs, ah)
	}
	return nil
}
