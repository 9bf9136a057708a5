package rxe_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/rxe"
)

// cmHost is one host of the Dial/Accept example: a device with a PD, a CQ
// and a registered buffer.
type cmHost struct {
	dev *rxe.Device
	pd  *rxe.PD
	cq  *rxe.CQ
	mr  *rxe.MR
	buf []byte
}

func newCMHost(conn netdev.Conn) cmHost {
	dev, err := rxe.Open(conn, rxe.Options{OwnConn: true})
	if err != nil {
		log.Fatal(err)
	}
	pd, _ := dev.AllocPD()
	cq, _ := dev.CreateCQ(64, -1)
	buf := make([]byte, 4096)
	mr, err := pd.RegMR(buf, rxe.AccessLocalWrite|rxe.AccessRemoteWrite)
	if err != nil {
		log.Fatal(err)
	}
	return cmHost{dev, pd, cq, mr, buf}
}

// newCMHosts returns a client and a server host joined by an in-memory
// pipe (127.0.0.1:4791 and 127.0.0.2:4791), and a function that closes
// both devices.
func newCMHosts() (client, server cmHost, closeBoth func()) {
	a, b := netdev.NewPipe()
	client, server = newCMHost(a), newCMHost(b)
	return client, server, func() {
		client.dev.Close()
		server.dev.Close()
	}
}

func (h cmHost) wait(ctx context.Context) rxe.WC {
	wc := make([]rxe.WC, 1)
	if _, err := h.cq.Wait(ctx, wc); err != nil {
		log.Fatal(err)
	}
	return wc[0]
}

// A client and a server connect through the connection manager (CM MADs
// on QP1, as librdmacm applications do), then the client SENDs a message
// and the server RDMA WRITEs its answer into the client's buffer, at the
// address and R_Key the client put in the connection's private data.
func ExampleDial() {
	client, server, closeBoth := newCMHosts() // 127.0.0.1:4791 and 127.0.0.2:4791
	defer closeBoth()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	l, err := server.dev.ListenCM(7471, rxe.CMOptions{PD: server.pd, SendCQ: server.cq})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		sc, err := l.Accept(ctx)
		if err != nil {
			log.Fatal(err)
		}
		sc.QP.PostRecv(rxe.RecvWR{ID: 1, SGList: []rxe.SGE{{Addr: server.mr.Addr(), Length: 64, LKey: server.mr.LKey()}}})
		wc := server.wait(ctx)
		fmt.Printf("server received %q\n", server.buf[:wc.ByteLen])
		// The client's private data: the address and R_Key of its buffer.
		var addr uint64
		var rkey uint32
		fmt.Sscanf(string(sc.PrivateData), "%x %x", &addr, &rkey)
		n := copy(server.buf[1024:], "pong")
		sc.QP.PostSend(rxe.SendWR{ID: 2, Opcode: rxe.WRRDMAWriteWithImm, Flags: rxe.SendSignaled, RemoteAddr: addr, RKey: rkey,
			SGList: []rxe.SGE{{Addr: server.mr.Addr() + 1024, Length: uint32(n), LKey: server.mr.LKey()}}})
		server.wait(ctx) // the WRITE's completion: the client's ACK
	}()

	pd := fmt.Sprintf("%x %x", client.mr.Addr()+2048, client.mr.RKey())
	cc, err := rxe.Dial(ctx, client.dev, "127.0.0.2:7471",
		rxe.CMOptions{PD: client.pd, SendCQ: client.cq, PrivateData: []byte(pd)})
	if err != nil {
		log.Fatal(err)
	}
	cc.QP.PostRecv(rxe.RecvWR{ID: 3}) // for the WRITE's immediate data
	n := copy(client.buf, "ping")
	cc.QP.PostSend(rxe.SendWR{ID: 4, Opcode: rxe.WRSend, Flags: rxe.SendSignaled,
		SGList: []rxe.SGE{{Addr: client.mr.Addr(), Length: uint32(n), LKey: client.mr.LKey()}}})
	client.wait(ctx) // the SEND
	wc := client.wait(ctx)
	cc.QP.Query() // orders this goroutine after the device's write into buf
	fmt.Printf("client's buffer holds %q after a %v\n", client.buf[2048:2048+wc.ByteLen], wc.Opcode)
	// The server's WRITE completes when the client's ACK reaches it, which
	// may be after the client has seen the WRITE: wait for the server before
	// leaving, which cancels ctx (its wait would fail).
	<-served
	if err := cc.Disconnect(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("disconnected; the QP is in", cc.QP.State())
	// Output:
	// server received "ping"
	// client's buffer holds "pong" after a RECV_RDMA_WITH_IMM
	// disconnected; the QP is in ERR
}

// An accept loop serves requests until its listener closes: Accept skips
// requests the peer abandons (counted in Counters), returns an
// *AcceptError for one this side could not set up, and ErrClosed once the
// listener or the device is closed. Close ends a connection without
// waiting for the peer's DREP.
func ExampleCMListener_Accept() {
	client, server, closeBoth := newCMHosts()
	defer closeBoth()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	l, err := server.dev.ListenCM(7472, rxe.CMOptions{PD: server.pd, SendCQ: server.cq})
	if err != nil {
		log.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		for {
			c, err := l.Accept(ctx)
			var ae *rxe.AcceptError
			switch {
			case errors.As(err, &ae):
				log.Print(err) // one request failed here; serve the next
				continue
			case err != nil:
				served <- err // ErrClosed or ctx's error
				return
			}
			<-c.Done() // serve until the client ends the connection
			c.QP.Destroy()
		}
	}()

	for range 2 {
		c, err := rxe.Dial(ctx, client.dev, "127.0.0.2:7472", rxe.CMOptions{PD: client.pd, SendCQ: client.cq})
		if err != nil {
			log.Fatal(err)
		}
		c.Close() // a DREQ; the server's connection ends
		c.QP.Destroy()
	}
	// The server's Accept took the second request before the client's Dial
	// returned (its REP came from there): closing the listener now ends
	// the loop after that connection.
	l.Close()
	fmt.Println("accept loop ended:", errors.Is(<-served, rxe.ErrClosed))
	fmt.Printf("%+v\n", l.Counters())
	// Output:
	// accept loop ended: true
	// {Accepted:2 Refused:0 Dropped:0 Withdrawn:0 TimedOut:0 Abandoned:0 Failed:0 Declined:0}
}

// A server gives each connection CQs of its own: AcceptWith creates that
// connection's QP with the options it is given instead of the listener's,
// here a CQ per connection on the least-used completion vector, so that
// each connection can be served by its own goroutine waiting on its own
// CQ.
func ExampleCMListener_AcceptWith() {
	client, server, closeBoth := newCMHosts()
	defer closeBoth()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	l, err := server.dev.ListenCM(7473, rxe.CMOptions{PD: server.pd, SendCQ: server.cq})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	got := make(chan string, 2)
	go func() {
		for i := range 2 {
			cq, err := server.dev.CreateCQ(16, -1) // -1: the least-used vector
			if err != nil {
				log.Fatal(err)
			}
			c, err := l.AcceptWith(ctx, rxe.CMOptions{PD: server.pd, SendCQ: cq})
			if err != nil {
				log.Fatal(err)
			}
			c.QP.PostRecv(rxe.RecvWR{SGList: []rxe.SGE{server.mr.SGE(64*i, 64)}})
			go func() {
				wc := make([]rxe.WC, 1)
				if _, err := cq.Wait(ctx, wc); err != nil {
					log.Fatal(err)
				}
				c.QP.Query() // orders this goroutine after the device's write into buf
				got <- fmt.Sprintf("connection %d received %q on its own CQ", i, server.buf[64*i:64*i+int(wc[0].ByteLen)])
			}()
		}
	}()

	for i := range 2 {
		c, err := rxe.Dial(ctx, client.dev, "127.0.0.2:7473", rxe.CMOptions{PD: client.pd, SendCQ: client.cq})
		if err != nil {
			log.Fatal(err)
		}
		n := copy(client.buf, fmt.Sprintf("hello %d", i))
		c.QP.PostSend(rxe.SendWR{Opcode: rxe.WRSend, Flags: rxe.SendSignaled, SGList: []rxe.SGE{client.mr.SGE(0, n)}})
		client.wait(ctx)
		fmt.Println(<-got)
		c.Close()
	}
	// Output:
	// connection 0 received "hello 0" on its own CQ
	// connection 1 received "hello 1" on its own CQ
}

// A server chooses each connection's options after seeing the request:
// AcceptFunc shows it who asks (address and RDMA CM port), its private
// data and its READ/atomic depths. Here a request whose private data
// does not carry the right token is refused with a REJ carrying a reason
// of the server's own, which the client gets as a *RejectError; the
// server's accept loop counts it as declined and serves the next one,
// and the Prepare of the options it chooses posts a receive before the
// REP goes out, ready for the client's first SEND.
func ExampleCMListener_AcceptFunc() {
	client, server, closeBoth := newCMHosts()
	defer closeBoth()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	l, err := server.dev.ListenCM(7474, rxe.CMOptions{PD: server.pd, SendCQ: server.cq})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	choose := func(r *rxe.CMRequest) (rxe.CMOptions, error) {
		if !bytes.HasPrefix(r.PrivateData, []byte("token=42")) {
			return rxe.CMOptions{}, &rxe.RejectError{PrivateData: []byte("bad token")}
		}
		return rxe.CMOptions{PD: server.pd, SendCQ: server.cq, Prepare: func(qp *rxe.QP) error {
			_, err := qp.PostRecv(rxe.RecvWR{SGList: []rxe.SGE{server.mr.SGE(0, 64)}})
			return err
		}}, nil
	}
	got := make(chan string, 1)
	go func() {
		for {
			c, err := l.AcceptFunc(ctx, choose)
			var ae *rxe.AcceptError
			switch {
			case errors.As(err, &ae):
				continue // refused or failed; serve the next
			case err != nil:
				log.Fatal(err)
			}
			wc := server.wait(ctx)
			c.QP.Query() // orders this goroutine after the device's write into buf
			got <- string(server.buf[:wc.ByteLen])
			return
		}
	}()

	for _, token := range []string{"token=7", "token=42"} {
		c, err := rxe.Dial(ctx, client.dev, "127.0.0.2:7474",
			rxe.CMOptions{PD: client.pd, SendCQ: client.cq, PrivateData: []byte(token)})
		var rej *rxe.RejectError
		if errors.As(err, &rej) {
			fmt.Printf("%s: refused (%v): %q\n", token, rej.Reason, rej.PrivateData)
			continue
		} else if err != nil {
			log.Fatal(err)
		}
		n := copy(client.buf, "hello")
		c.QP.PostSend(rxe.SendWR{Opcode: rxe.WRSend, Flags: rxe.SendSignaled, SGList: []rxe.SGE{client.mr.SGE(0, n)}})
		client.wait(ctx)
		fmt.Printf("%s: the server received %q\n", token, <-got)
		c.Close()
	}
	fmt.Printf("%+v\n", l.Counters())
	// Output:
	// token=7: refused (consumer reject): "bad token"
	// token=42: the server received "hello"
	// {Accepted:1 Refused:0 Dropped:0 Withdrawn:0 TimedOut:0 Abandoned:0 Failed:0 Declined:1}
}

// udQP returns a UD QP of h in RTS with librdmacm's Q_Key
// (rxe.RDMAUDPQKey), as rdma_create_qp leaves the QP of an RDMA_PS_UDP id.
func (h cmHost) udQP() *rxe.QP {
	qp, err := h.pd.CreateQP(rxe.QPInitAttr{Type: rxe.QPTypeUD, SendCQ: h.cq, RecvCQ: h.cq,
		Cap: rxe.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range []struct {
		attr rxe.QPAttr
		mask rxe.QPAttrMask
	}{
		{rxe.QPAttr{State: rxe.QPSInit, Port: 1, QKey: rxe.RDMAUDPQKey}, rxe.QPAttrState | rxe.QPAttrPKeyIndex | rxe.QPAttrPort | rxe.QPAttrQKey},
		{rxe.QPAttr{State: rxe.QPSRTR}, rxe.QPAttrState},
		{rxe.QPAttr{State: rxe.QPSRTS}, rxe.QPAttrState | rxe.QPAttrSQPSN},
	} {
		if err := qp.Modify(&m.attr, m.mask); err != nil {
			log.Fatal(err)
		}
	}
	return qp
}

// A client resolves a UD service through the connection manager (a
// SIDR_REQ and its SIDR_REP on QP1, as librdmacm's RDMA_PS_UDP ids do),
// then SENDs a datagram to the QPN and Q_Key the server answered with.
// The server reads the client's private data from the request; its
// receive buffer starts with the 40-byte GRH area of every UD receive.
func ExampleDialUD() {
	client, server, closeBoth := newCMHosts() // 127.0.0.1:4791 and 127.0.0.2:4791
	defer closeBoth()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// The server: a UD QP with a receive posted, and a listener on RDMA
	// CM port 7471 of the UDP port space.
	sqp := server.udQP()
	if _, err := sqp.PostRecv(rxe.RecvWR{ID: 1, SGList: []rxe.SGE{{Addr: server.mr.Addr(), Length: 1024, LKey: server.mr.LKey()}}}); err != nil {
		log.Fatal(err)
	}
	l, err := server.dev.ListenUD(7471)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		r, err := l.Accept(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("server: request from %v: %q\n", r.Remote.Addr(), bytes.TrimRight(r.PrivateData, "\x00"))
		if err := r.Answer(sqp, nil); err != nil { // SIDR_REP: sqp's QPN and Q_Key
			log.Fatal(err)
		}
	}()

	// The client: resolve, then send.
	peer, err := rxe.DialUD(ctx, client.dev, "127.0.0.2:7471", rxe.UDOptions{PD: client.pd, PrivateData: []byte("hello")})
	if err != nil {
		log.Fatal(err)
	}
	defer peer.AH.Destroy()
	<-served
	fmt.Printf("client: QPN is the server's: %v, Q_Key %#x\n", peer.QPN == sqp.QPN(), peer.QKey)
	cqp := client.udQP()
	n := copy(client.buf, "datagram")
	if _, err := cqp.PostSend(rxe.SendWR{ID: 2, Opcode: rxe.WRSend, Flags: rxe.SendSignaled, AH: peer.AH,
		RemoteQPN: peer.QPN, RemoteQKey: peer.QKey,
		SGList: []rxe.SGE{{Addr: client.mr.Addr(), Length: uint32(n), LKey: client.mr.LKey()}}}); err != nil {
		log.Fatal(err)
	}
	if wc := client.wait(ctx); wc.Status != rxe.WCSuccess {
		log.Fatal(wc.Status)
	}
	wc := server.wait(ctx)
	fmt.Printf("server: %q\n", server.buf[rxe.GRHSize:wc.ByteLen])

	// Output:
	// server: request from 127.0.0.1: "hello"
	// client: QPN is the server's: true, Q_Key 0x1234567
	// server: "datagram"
}
