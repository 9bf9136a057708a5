package rxe

// UD over the RDMA CM (librdmacm's RDMA_PS_UDP port space): no connection,
// a service ID resolution (IBA 12.11). The client's SIDR_REQ names the
// service by RDMA CM's UDP service ID for the port (IBTA Annex A11.2.1) and
// carries RDMA CM's IP header (A11.2.2.1) before its private data; the
// server's SIDR_REP gives its UD QP's QPN and Q_Key (kernel rdma_cm:
// cma_resolve_ib_udp, cma_send_sidr_rep, cma_sidr_rep_handler).

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/cm"
)

// RDMAUDPQKey is the Q_Key of librdmacm's UD port space (RDMA_UDP_QKEY):
// rdma_cm gives it to the UD QPs of RDMA_PS_UDP ids (cma_set_default_qkey,
// through rdma_create_qp), its passive side answers with it, and its
// active side refuses a SIDR_REP with any other once its id has a QP
// (cma_sidr_rep_handler). A QP that answers librdmacm clients through a
// UDListener must have it.
const RDMAUDPQKey = 0x01234567

// SIDRPrivateDataSize is how many bytes of private data a DialUD carries:
// the SIDR_REQ's 216 less RDMA CM's 36-byte IP header.
const SIDRPrivateDataSize = packet.SIDRREQPrivateDataSize - packet.CMIPHeaderSize

// Defaults of UDOptions: rdma_cm's for its SIDR_REQ (cma_resolve_ib_udp:
// 1 << (CMA_CM_RESPONSE_TIMEOUT − 8) ms and CMA_MAX_CM_RETRIES).
const (
	defaultSIDRWait    = 4096 * time.Millisecond
	defaultSIDRRetries = 15
)

// UDOptions are the parameters of a DialUD. PD is required.
type UDOptions struct {
	// PD is where the address handle of the peer is created; it must be
	// the dialing device's.
	PD *PD
	// QKey is the Q_Key the service must answer with; 0 means
	// RDMAUDPQKey, as librdmacm's active side requires.
	QKey uint32
	// PrivateData goes to the service after RDMA CM's IP header: at most
	// SIDRPrivateDataSize bytes.
	PrivateData []byte
	// LocalPort is the RDMA CM source port in the IP header; 0 picks one.
	LocalPort uint16
	// Wait is how long each SIDR_REQ waits for its SIDR_REP; 0 means
	// 4.096 s, rdma_cm's (cma_resolve_ib_udp: 1 << (CMA_CM_RESPONSE_TIMEOUT
	// − 8) ms). A negative Wait is ErrInvalidArgument.
	Wait time.Duration
	// MaxCMRetries is how often the SIDR_REQ is resent after the first try
	// when no SIDR_REP comes; 0 means 15, rdma_cm's CMA_MAX_CM_RETRIES, so
	// a resolution of one try only cannot be asked for (librdmacm's
	// rdma_connect offers no choice: always 15).
	MaxCMRetries uint8
}

// UDPeer is a UD service that DialUD resolved: where to send and with
// which Q_Key.
type UDPeer struct {
	// QPN and QKey are the service's UD QP and Q_Key (the SIDR_REP's).
	QPN, QKey uint32
	// AH is the address handle of the service's device, created on
	// UDOptions.PD; destroying it is the caller's.
	AH *AddrHandle
	// LocalAddr and RemoteAddr are the IP addresses and RDMA CM ports.
	LocalAddr, RemoteAddr netip.AddrPort
	// PrivateData is the SIDR_REP's, as the wire carries it (136 bytes).
	PrivateData []byte
}

// SIDRError is a UD service's refusal: the SIDR_REP's status
// (packet.SIDRServiceIDNotSup: nobody listens on that port;
// packet.SIDRRejected: the service refused) and private data.
type SIDRError struct {
	Status      uint8
	PrivateData []byte
}

var sidrStatusNames = [...]string{"valid", "service ID not supported", "rejected", "no QP", "redirect", "SIDR version not supported"}

// Error describes the refusal.
func (e *SIDRError) Error() string {
	name := "status?"
	if int(e.Status) < len(sidrStatusNames) {
		name = sidrStatusNames[e.Status]
	}
	return fmt.Sprintf("rxe: UD service refused by the peer: %s (%d)", name, e.Status)
}

// ErrQKeyMismatch: the UD service answered with another Q_Key than
// UDOptions.QKey. Kernel rdma_cm reports it as RDMA_CM_EVENT_ADDR_ERROR,
// status -EINVAL, to a client whose id already has a Q_Key, as
// rdma_create_qp gives it (cma_sidr_rep_handler, cma_set_qkey); a refusing
// status is RDMA_CM_EVENT_UNREACHABLE instead (here a *SIDRError). A Q_Key
// of 0 is a mismatch here too, where cma_set_qkey lets it pass (it compares
// a non-zero one only) and hands the client 0 as the Q_Key to send with:
// a UDPeer's QKey is always the one its caller expects. Only the client's
// application sees the difference; nothing else goes on the wire.
var ErrQKeyMismatch = errors.New("rxe: the UD service's Q_Key is not the expected one")

// DialUD resolves the UD service at addr ("host:port", port being the RDMA
// CM port, as rdma_resolve_addr and rdma_connect take it for an
// RDMA_PS_UDP id), as librdmacm's active side does: it sends a SIDR_REQ
// with RDMA CM's IP header and opts.PrivateData, resends it every
// opts.Wait up to opts.MaxCMRetries times, and from the SIDR_REP returns
// the service's QPN, Q_Key and an address handle to send to. It honours
// ctx. The errors say what went wrong: a *SIDRError (refused, e.g. nobody
// listens on the port), ErrQKeyMismatch, ErrCMTimeout (nobody answered),
// ErrUnreachable, ErrClosed, or ctx's error.
func DialUD(ctx context.Context, d *Device, addr string, opts UDOptions) (*UDPeer, error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	if opts.PD == nil || opts.PD.dev != d {
		return nil, fmt.Errorf("%w: UDOptions needs a PD of %s", ErrInvalidArgument, d.Name())
	}
	if len(opts.PrivateData) > SIDRPrivateDataSize {
		return nil, fmt.Errorf("%w: %d bytes of private data (a SIDR_REQ carries %d)", ErrInvalidArgument, len(opts.PrivateData), SIDRPrivateDataSize)
	}
	if opts.Wait < 0 {
		return nil, fmt.Errorf("%w: UDOptions.Wait %v", ErrInvalidArgument, opts.Wait)
	}
	if opts.QKey == 0 {
		opts.QKey = RDMAUDPQKey
	}
	if opts.Wait == 0 {
		opts.Wait = defaultSIDRWait
	}
	if opts.MaxCMRetries == 0 {
		opts.MaxCMRetries = defaultSIDRRetries
	}
	to, err := resolve(ctx, d, addr)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	from := localCMAddr(d, opts.LocalPort)
	req := buildSIDRREQ(from, to, opts.PrivateData)
	g := d.gsiOf()
	id, events, err := g.startActive(func(now time.Time) (cm.ID, error) {
		return g.agent.ResolveSIDR(now, to.Addr(), &req, opts.Wait, opts.MaxCMRetries)
	})
	if err != nil {
		return nil, err
	}
	for {
		select {
		case <-ctx.Done():
			g.abandonActive(id)
			return nil, ctx.Err()
		case <-d.done: // the agent's timers run no more: no answer will come
			g.forgetActive(id)
			return nil, ErrClosed
		case e := <-events:
			switch e.Kind {
			case cm.EventSIDRREP:
				g.forgetActive(id)
				return udPeer(e.SIDRREP, from, to, &opts)
			case cm.EventTimeout:
				g.forgetActive(id)
				return nil, ErrCMTimeout
			}
		}
	}
}

// buildSIDRREQ fills the SIDR_REQ of a DialUD from "from" to "to", as
// rdma_cm builds it: the UDP port space's service ID for the port, the
// default P_Key, RDMA CM's IP header and then the private data.
func buildSIDRREQ(from, to netip.AddrPort, privateData []byte) packet.SIDRREQ {
	req := packet.SIDRREQ{ServiceID: packet.RDMACMServiceID(packet.RDMACMProtoUDP, to.Port()), PKey: packet.DefaultPKey}
	ip := packet.CMIPHeader{SrcPort: from.Port(), Src: from.Addr(), Dst: to.Addr()}
	ip.Encode(req.PrivateData[:])
	copy(req.PrivateData[packet.CMIPHeaderSize:], privateData)
	return req
}

// udPeer makes the UDPeer of a SIDR_REP, or the error of a refusing one.
func udPeer(rep *packet.SIDRREP, from, to netip.AddrPort, o *UDOptions) (*UDPeer, error) {
	pd := append([]byte(nil), rep.PrivateData[:]...)
	if rep.Status != packet.SIDRValid {
		return nil, &SIDRError{Status: rep.Status, PrivateData: pd}
	}
	if rep.QKey != o.QKey {
		return nil, fmt.Errorf("%w: %#x, want %#x", ErrQKeyMismatch, rep.QKey, o.QKey)
	}
	// The service's UD QP is on its device's UDP port, which the CM
	// assumes to be this device's (gsi.send).
	ah, err := o.PD.CreateAH(AH{DGID: to.Addr(), UDPPort: o.PD.dev.port, HopLimit: 64})
	if err != nil {
		return nil, err
	}
	return &UDPeer{QPN: rep.QPN, QKey: rep.QKey, AH: ah, LocalAddr: from, RemoteAddr: to, PrivateData: pd}, nil
}

// UDListener takes the SIDR requests for one RDMA CM port of the UDP port
// space (an rdma_listen of an RDMA_PS_UDP id on the device's address).
type UDListener struct {
	d       *Device
	port    uint16
	service uint64
	reqs    chan udQueued
	closed  chan struct{}
}

// udQueued is a SIDR request waiting for an Accept.
type udQueued struct {
	id   cm.ID
	peer netip.Addr
	req  packet.SIDRREQ
}

// UDRequest is one client's SIDR request, which the caller answers once
// with Answer or Reject.
type UDRequest struct {
	// Remote is the requester's address and RDMA CM port (from RDMA CM's
	// IP header).
	Remote netip.AddrPort
	// PrivateData is the SIDR_REQ's after the IP header, as the wire
	// carries it (180 bytes).
	PrivateData []byte

	l  *UDListener
	id cm.ID
}

// udBacklog is how many SIDR requests wait for an Accept; beyond, a
// request is refused with status "rejected", as kernel rdma_cm refuses
// one beyond the backlog of rdma_listen (ucma_connect_event_handler fails,
// and cm_destroy_id answers the SIDR_REQ with IB_SIDR_REJECT; the
// exception it makes for -ENOMEM, sending nothing, is for a REQ only).
const udBacklog = 64

// ListenUD listens for RDMA CM UD requests (SIDR_REQs for the UDP port
// space's service ID of port) to the device's address. Each is answered
// by the caller (Accept, then UDRequest.Answer or Reject). A request
// without RDMA CM's IP header, or whose header names another destination
// than the device's address, is refused (status "rejected"), as kernel
// rdma_cm refuses it before its consumer sees it; so is one beyond the
// backlog (64 waiting for an Accept), as rdma_cm refuses one beyond its
// listener's backlog. A repeat of a request not yet answered is dropped
// by the CM.
func (d *Device) ListenUD(port uint16) (*UDListener, error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	l := &UDListener{d: d, port: port, service: packet.RDMACMServiceID(packet.RDMACMProtoUDP, port),
		reqs: make(chan udQueued, udBacklog), closed: make(chan struct{})}
	g := d.gsiOf()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.down {
		return nil, ErrClosed
	}
	if err := g.agent.ListenSIDR(l.service); err != nil {
		return nil, fmt.Errorf("%w: UD port %d: %w", ErrInvalidArgument, port, err)
	}
	if g.udListeners == nil {
		g.udListeners = map[uint64]*UDListener{}
	}
	g.udListeners[l.service] = l
	return l, nil
}

// Addr returns the address and port the listener serves.
func (l *UDListener) Addr() netip.AddrPort { return netip.AddrPortFrom(l.d.addr, l.port) }

// dispatchSIDR queues a SIDR request for its listener's Accept (caller:
// dispatch, holding mu), or refuses it.
func (g *gsi) dispatchSIDR(e cm.Event) {
	refuse := func(status uint8) {
		_ = g.agent.AnswerSIDR(e.ID, &packet.SIDRREP{Status: status}) // ErrUnknownID: already answered (Shutdown)
	}
	l := g.udListeners[e.SIDRREQ.ServiceID]
	if l == nil {
		refuse(packet.SIDRServiceIDNotSup)
		return
	}
	// Kernel rdma_cm refuses these before its consumer sees them: its
	// handler (cma_ib_req_handler) fails, and ib_cm answers the SIDR_REQ it
	// received with IB_SIDR_REJECT (cm_sidr_req_handler → cm_destroy_id).
	var ip packet.CMIPHeader
	if ip.Decode(e.SIDRREQ.PrivateData[:]) != nil {
		refuse(packet.SIDRRejected) // cma_save_ip_info refuses a CMA version other than 0; an IP version neither 4 nor 6 matches no IP listener (cma_match_private_data)
		return
	}
	// The listener is bound to the device's address: cma_match_private_data
	// takes a request only if the header names that address, in its IP
	// version. (rdma_cm counts a loopback bind address as any, cma_any_addr;
	// a gorxe device on a loopback address is a node of its own, so its
	// address is checked too. Its other check, validate_net_dev's route back
	// to the source through the receiving interface, has no gorxe
	// counterpart.)
	if ip.Dst != l.d.addr {
		refuse(packet.SIDRRejected)
		return
	}
	select {
	case l.reqs <- udQueued{id: e.ID, peer: e.Peer, req: *e.SIDRREQ}:
	default:
		refuse(packet.SIDRRejected) // the backlog is full: ucma_connect_event_handler fails with -ENOMEM
	}
}

// Accept waits for the next SIDR request. It returns ErrClosed once the
// listener or the device is closed, or ctx's error; a ctx already ended
// at the call takes no request, which stays queued for the next call.
func (l *UDListener) Accept(ctx context.Context) (*UDRequest, error) {
	select {
	case <-l.closed:
		return nil, ErrClosed
	default:
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case q := <-l.reqs:
		var ip packet.CMIPHeader
		_ = ip.Decode(q.req.PrivateData[:]) // cannot fail: dispatchSIDR queued only requests whose header decodes
		return &UDRequest{Remote: netip.AddrPortFrom(q.peer, ip.SrcPort),
			PrivateData: append([]byte(nil), q.req.PrivateData[packet.CMIPHeaderSize:]...), l: l, id: q.id}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.closed:
		return nil, ErrClosed
	case <-l.d.done:
		return nil, ErrClosed
	}
}

// Answer tells the requester to send to qp: a SIDR_REP of status valid
// with qp's QPN and Q_Key (librdmacm clients require RDMAUDPQKey) and
// privateData (at most 136 bytes), as rdma_accept of an RDMA_PS_UDP id
// does. qp must be a UD QP of the listener's device. A request answered
// already, or ended by the device's Close, gives ErrInvalidState.
func (r *UDRequest) Answer(qp *QP, privateData []byte) error {
	if qp == nil || qp.Type() != QPTypeUD || qp.dev != r.l.d {
		return fmt.Errorf("%w: Answer needs a UD QP of %s", ErrInvalidArgument, r.l.d.Name())
	}
	rep := packet.SIDRREP{Status: packet.SIDRValid, QPN: qp.QPN(), QKey: qp.Query().QKey}
	return r.answer(&rep, privateData)
}

// Reject refuses the request with status "rejected" and privateData (at
// most 136 bytes), as rdma_reject of an RDMA_PS_UDP id does.
func (r *UDRequest) Reject(privateData []byte) error {
	return r.answer(&packet.SIDRREP{Status: packet.SIDRRejected}, privateData)
}

func (r *UDRequest) answer(rep *packet.SIDRREP, privateData []byte) error {
	if len(privateData) > packet.SIDRREPPrivateDataSize {
		return fmt.Errorf("%w: %d bytes of private data (a SIDR_REP carries %d)", ErrInvalidArgument, len(privateData), packet.SIDRREPPrivateDataSize)
	}
	copy(rep.PrivateData[:], privateData)
	g := r.l.d.gsiOf()
	g.mu.Lock()
	err := g.agent.AnswerSIDR(r.id, rep)
	g.step(time.Now())
	g.unlock()
	if err != nil {
		return fmt.Errorf("%w: the request is answered or gone: %w", ErrInvalidState, err)
	}
	return nil
}

// Close stops listening: the requests queued that no Accept took are
// answered with status "rejected", later ones with "service ID not
// supported"; Accepts waiting return ErrClosed. Requests already taken
// stay for their Answer. So does kernel rdma_cm when a UD listener is
// destroyed: ucma_cleanup_ctx_events destroys the ids of the connect
// requests not yet delivered, and cm_destroy_id answers a SIDR_REQ
// received but unanswered with IB_SIDR_REJECT; with the listener gone,
// cm_sidr_req_handler finds none for later ones (IB_SIDR_UNSUPPORTED).
func (l *UDListener) Close() error {
	g := l.d.gsiOf()
	return closeListener(g, l.closed, l.reqs, func() {
		g.agent.UnlistenSIDR(l.service)
		delete(g.udListeners, l.service)
	}, func(q udQueued) {
		_ = g.agent.AnswerSIDR(q.id, &packet.SIDRREP{Status: packet.SIDRRejected}) // ErrUnknownID: gone with a Shutdown
	})
}
