// Package rxe is gorxe's RDMA device and verbs API: soft-RoCE in user space
// over a netdev.Conn (UDP port 4791 by default), wire-compatible with the
// Linux kernel's rxe driver and RDMA NICs.
//
// The object model is libibverbs': a Device has protection domains (PD),
// memory regions (MR) registered on a PD, completion queues (CQ), queue
// pairs (QP), shared receive queues (SRQ) and, for UD sends, address
// handles (AddrHandle) on a PD. Work requests are posted to a
// QP; completions are polled from a CQ. Enum values equal libibverbs' (see
// package rxe/verbs, re-exported here), so statuses and opcodes compare and
// print like C tools.
//
//	dev, _ := rxe.Listen(netip.MustParseAddrPort("127.0.0.1:4791"), rxe.Options{})
//	pd, _ := dev.AllocPD()
//	mr, _ := pd.RegMR(buf, rxe.AccessLocalWrite|rxe.AccessRemoteRead)
//	cq, _ := dev.CreateCQ(256, -1)
//	qp, _ := pd.CreateQP(rxe.QPInitAttr{Type: rxe.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: ...})
//	qp.Modify(&rxe.QPAttr{State: rxe.QPSInit, ...}, rxe.QPAttrState|...)
//
// Two ways connect an RC QP to its peer: QP.Connect with the peer's
// ConnInfo exchanged out of band (as perftest does over TCP), or the
// communication manager on QP1, as RDMA CM does: Dial on one side
// and Device.ListenCM then CMListener.Accept on the other give a CMConn,
// whose Disconnect (a DREQ, waiting for the DREP) or Close (not waiting)
// ends the connection; destroying its QP closes it too. Accept skips the
// requests that their peers abandon and returns an *AcceptError for one
// this side could not set up, so an accept loop continues on that and
// stops on ErrClosed; CMListener.AcceptWith gives one connection its own
// CQs or other resources (docs/cm.md, docs/api.md).
//
// Threading: see docs/threading.md. In short, a Device has completion
// vectors (Options.CompVectors, default GOMAXPROCS); each has a transmit
// goroutine (it pulls the packets of its runnable QPs into batches and
// sends them) and, with one socket per vector (Listen), a receive
// goroutine (it reads batches of datagrams, checks the ICRC and drives its
// QPs' responder and completer); the kernel steers each QP's packets to
// its vector's socket by QPN. A QP belongs to its receive CQ's vector and
// owns its state under one lock: the device drives it only through its
// step (qpstep.go). One timer per vector only marks QPs runnable
// (timers.go). Every verbs call is safe for concurrent use.
package rxe
