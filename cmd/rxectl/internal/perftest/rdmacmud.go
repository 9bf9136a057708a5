package perftest

// -R -c UD: the test QPs are UD QPs, which the RDMA CM resolves rather than
// connects (librdmacm's RDMA_PS_UDP port space; IBA 12.11 SIDR), as
// perftest does (perftest_communication.c: rdma_cm_request_ud_connection_
// parameters, rdma_cm_initialize_ud_connection_parameters,
// rdma_cm_establish_ud_connection, rdma_cm_send_ud_connection_parameters).
// The exchange's connection stays an RC one (create_comm_struct makes it
// RC whatever -c is), so the key exchanges run as for RC.
//
// For each test QP the client's SIDR_REQ goes to the server's RDMA CM port
// -p in the UDP port space; the server answers with its UD QP's QPN and
// Q_Key (librdmacm's RDMA_UDP_QKEY, which its UD QPs take). When the
// server sends too (a latency test, send-bw -b) it needs the client's QP
// and address: the client sends it one SEND with immediate data, its QPN,
// as soon as the SIDR_REP is in, and the server makes its address handle
// from that SEND's completion, into a receive it posted before answering.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/oob"
	"github.com/gorxe/gorxe/rxe"
)

// cmUDWait bounds the server's wait for the client's QPN message after its
// SIDR_REP, and the client's for that message's send completion.
const cmUDWait = cmDialTimeout

// udQKey returns the Q_Key of the test QPs of -c UD: perftest's DEF_QKEY,
// or with -R librdmacm's RDMA_UDP_QKEY, which rdma_cm gives the QPs of its
// UDP port space (ucma_init_ud_qp).
func (s *session) udQKey() uint32 {
	if s.cm != nil {
		return rxe.RDMAUDPQKey
	}
	return udQKey
}

// udSendsBack reports whether the server of a UD test sends to the client
// and so needs its QPN and address: latency tests and send-bw -b
// (perftest: tst == LAT or BW with duplex).
func (s *session) udSendsBack() bool { return s.t.lat || s.o.bidir }

// connectCMQPsUD is connectCMQPs for -c UD: the same two synchronising
// exchanges around the test QPs' setup, each test QP a UD QP that rdma_cm
// would create (INIT with RDMA_UDP_QKEY, RTR, RTS with SQ PSN 0:
// librdmacm's ucma_init_ud_qp), resolved by the client (DialUD) and
// answered by the server (ListenUD, Answer). The server listens before
// the first exchange, so the client's requests never find the port
// closed, and stops once it has answered its last test QP, so that a
// client of more test QPs is refused.
func (s *session) connectCMQPsUD() error {
	o := s.o
	var ln *rxe.UDListener
	if !s.client {
		var err error
		if ln, err = s.dev.ListenUD(s.cm.port); err != nil {
			return fmt.Errorf("listen on RDMA CM UD port %d: %w (another server running? try -p)", s.cm.port, err)
		}
		defer ln.Close()
	}
	s.my = make([]oob.KeyMsg, 1) // zero, as perftest's my_dest is until the QPs exist
	if err := s.hs("synchronising before the rdma_cm connections"); err != nil {
		return err
	}
	for i := range o.qps {
		qp, err := s.newCMUDQP(i)
		if err != nil {
			return fmt.Errorf("UD test QP %d: %w", i, err)
		}
		ctx, release := s.watchCMSetup()
		if s.client {
			err = s.resolveUD(ctx, i, qp)
		} else {
			err = s.answerUD(ctx, ln, i, qp)
		}
		release()
		if err != nil {
			return fmt.Errorf("rdma_cm resolution of UD test QP %d: %w", i, err)
		}
	}
	if ln != nil {
		// The last test QP is answered: a client of more test QPs gets
		// its next SIDR_REQ refused at once, not queued unanswered while
		// this end waits in the exchange. (The deferred Close then finds
		// it closed.)
		if err := ln.Close(); err != nil {
			return fmt.Errorf("close the RDMA CM UD listener of port %d: %w", s.cm.port, err)
		}
	}
	if err := s.hs("synchronising after the rdma_cm connections"); err != nil {
		return err
	}
	gid := s.dev.GID().As16()
	s.my = s.my[:0]
	for i, qp := range s.qps {
		s.my = append(s.my, oob.KeyMsg{OutReads: uint16(s.outReads), QPN: qp.QPN(), RKey: s.mr.RKey(),
			VAddr: s.remoteRegion(i), GID: gid})
	}
	s.rem = make([]oob.KeyMsg, o.qps)
	s.startCounters()
	return nil
}

// newCMUDQP creates test QP i as a UD QP in RTS, as rdma_create_qp of an
// RDMA_PS_UDP id leaves it.
func (s *session) newCMUDQP(i int) (*rxe.QP, error) {
	o := s.o
	scq, rcq := s.qpCQs(i)
	qp, err := s.pd.CreateQP(rxe.QPInitAttr{Type: rxe.QPTypeUD, SendCQ: scq, RecvCQ: rcq, SRQ: s.srq,
		Cap: rxe.QPCap{MaxSendWR: o.txDepth, MaxRecvWR: s.qpRecvWR(), MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: o.inline}})
	if err != nil {
		return nil, err
	}
	s.qps = append(s.qps, qp)
	s.cm.udQPs = append(s.cm.udQPs, qp)
	steps := []qpStep{
		{rxe.QPAttr{State: rxe.QPSInit, Port: 1, QKey: rxe.RDMAUDPQKey}, rxe.QPAttrState | rxe.QPAttrPKeyIndex | rxe.QPAttrPort | rxe.QPAttrQKey},
		{rxe.QPAttr{State: rxe.QPSRTR}, rxe.QPAttrState},
		{rxe.QPAttr{State: rxe.QPSRTS, SQPSN: 0}, rxe.QPAttrState | rxe.QPAttrSQPSN},
	}
	if err := modifySteps(qp, steps); err != nil {
		return nil, fmt.Errorf("ready UD QP %#x: %w", qp.QPN(), err)
	}
	return qp, nil
}

// resolveUD is the client's side for test QP i: DialUD, retried while the
// server does not listen yet as dial retries a refused connection, the
// address handle of the SIDR_REP, and, when the server sends back, the
// QPN message. ctx (watchCMSetup's) ends the waits early.
func (s *session) resolveUD(ctx context.Context, i int, qp *rxe.QP) error {
	st := s.cm
	st.udpPort = s.dev.Addr().Port() // where DialUD sends the SIDR_REQ
	var peer *rxe.UDPeer
	for try := 1; ; try++ {
		dctx, cancel := context.WithTimeout(ctx, cmDialTimeout)
		var err error
		peer, err = rxe.DialUD(dctx, s.dev, st.target, rxe.UDOptions{PD: s.pd})
		cancel()
		if err == nil {
			break
		}
		if cause := setupCause(ctx); cause != nil {
			return cause
		}
		// Refused: nobody listens on the port, or the server closed its
		// listener with this request queued (connectCMQPsUD, once its
		// last test QP is answered; rxe.UDListener.Close).
		var se *rxe.SIDRError
		refused := errors.As(err, &se) && (se.Status == sidrServiceIDNotSup || se.Status == sidrRejected)
		if !refused || try == cmDialAttempts {
			return st.dialError(st.stop, err, refused, try, i)
		}
		select {
		case <-time.After(cmDialPause):
		case <-ctx.Done():
			if cause := setupCause(ctx); cause != nil {
				return cause
			}
			return fmt.Errorf("rdma_cm connect to %s: interrupted", st.target)
		}
	}
	s.ahs = append(s.ahs, peer.AH)
	s.peerAddr = netip.AddrPortFrom(peer.RemoteAddr.Addr(), s.dev.Addr().Port())
	if !s.udSendsBack() {
		return nil
	}
	// rdma_cm_send_ud_connection_parameters: one signalled SEND with
	// immediate data, the QPN, 4 bytes of payload (the QPN in host byte
	// order, as perftest copies it).
	off := s.localRegion(i)
	binary.LittleEndian.PutUint32(s.mr.Bytes()[off:], qp.QPN())
	wr := rxe.SendWR{ID: 0, Opcode: rxe.WRSendWithImm, Imm: qp.QPN(), Flags: rxe.SendSignaled, AH: peer.AH,
		RemoteQPN: peer.QPN, RemoteQKey: peer.QKey, SGList: []rxe.SGE{s.mr.SGE(off, 4)}}
	if _, err := qp.PostSend(wr); err != nil {
		return fmt.Errorf("send this QP's number to the server: %w", err)
	}
	scq, _ := s.qpCQs(i)
	wc, err := s.waitCMUD(ctx, scq, "the send completion of this QP's number")
	if err != nil {
		return err
	}
	if wc.Status != rxe.WCSuccess {
		return fmt.Errorf("send this QP's number to the server: %v", wc.Status)
	}
	return nil
}

// sidrServiceIDNotSup is the SIDR_REP status "service ID not supported"
// (IBA 12.11.2, table 120): nobody listens on the port.
const sidrServiceIDNotSup = 1

// sidrRejected is the SIDR_REP status "rejected" (IBA 12.11.2, table
// 120), rxe.UDListener.Close's answer to the requests it held.
const sidrRejected = 2

// answerUD is the server's side for test QP i: take the next request,
// post the receive of the client's QPN message when the server sends
// back (rdma_cm_request_ud_connection_parameters: before rdma_accept, so
// the message, which nothing resends, finds it), answer with the QP, and
// make the address handle of the client from that message's completion
// (rdma_cm_initialize_ud_connection_parameters). ctx (watchCMSetup's) ends
// the waits early.
func (s *session) answerUD(ctx context.Context, ln *rxe.UDListener, i int, qp *rxe.QP) error {
	r, err := ln.Accept(ctx)
	if err != nil {
		if s.cm.stop.Err() != nil {
			return errors.New("interrupted while waiting for a client")
		}
		if cause := setupCause(ctx); cause != nil {
			return fmt.Errorf("no request from the client: %w", cause)
		}
		return err
	}
	s.cm.requested.Store(true)
	s.peerAddr = netip.AddrPortFrom(r.Remote.Addr(), s.dev.Addr().Port())
	off := s.localRegion(i)
	if s.udSendsBack() {
		rw := rxe.RecvWR{ID: 0, SGList: []rxe.SGE{s.mr.SGE(off, rxe.GRHSize+4)}}
		if s.srq != nil {
			_, err = s.srq.PostRecv(rw)
		} else {
			_, err = qp.PostRecv(rw)
		}
		if err != nil {
			_ = r.Reject(nil) // the client learns at once; this end fails with err
			return fmt.Errorf("post the receive of the client's QP number: %w", err)
		}
	}
	if err := r.Answer(qp, nil); err != nil {
		return err
	}
	if !s.udSendsBack() {
		return nil
	}
	_, rcq := s.qpCQs(i)
	wc, err := s.waitCMUD(ctx, rcq, "the client's QP number")
	if err != nil {
		return err
	}
	if wc.Status != rxe.WCSuccess || wc.Flags&rxe.WCFlagWithImm == 0 {
		return fmt.Errorf("the client's QP number: a completion %v without immediate data (does the client run the same test with -R?)", wc.Status)
	}
	ah, err := s.pd.CreateAHFromWC(&wc, s.mr.Bytes()[off:off+rxe.GRHSize])
	if err != nil {
		return fmt.Errorf("address handle of the client: %w", err)
	}
	s.ahs = append(s.ahs, ah)
	return nil
}

// waitCMUD waits up to cmUDWait for one completion on cq during the UD
// setup, or until watch (watchCMSetup's context) ends: the interrupt, or the
// peer gone.
func (s *session) waitCMUD(watch context.Context, cq *rxe.CQ, what string) (rxe.WC, error) {
	ctx, cancel := context.WithTimeout(watch, cmUDWait)
	defer cancel()
	wc := make([]rxe.WC, 1)
	if n, err := cq.Wait(ctx, wc); n == 1 {
		return wc[0], nil
	} else if s.cm.stop.Err() != nil {
		return rxe.WC{}, fmt.Errorf("interrupted while waiting for %s", what)
	} else if cause := setupCause(watch); cause != nil {
		return rxe.WC{}, fmt.Errorf("waiting for %s: %w", what, cause)
	} else if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return rxe.WC{}, fmt.Errorf("waiting for %s: %w", what, err)
	}
	return rxe.WC{}, fmt.Errorf("no %s within %v", what, cmUDWait)
}

// connectCMUD stands for ctx_connect under -R -c UD: the QPs are in RTS and
// resolveUD or answerUD set the peer's address.
func (s *session) connectCMUD() error {
	s.rqPSN = s.rem[0].PSN
	return nil
}
