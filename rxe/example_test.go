package rxe_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/rxe"
)

// side is one host of the example: a device, a PD, a CQ, an RC QP and a
// registered buffer.
type side struct {
	dev *rxe.Device
	cq  *rxe.CQ
	qp  *rxe.QP
	mr  *rxe.MR
}

func newSide(conn netdev.Conn) side {
	dev, err := rxe.Open(conn, rxe.Options{OwnConn: true})
	if err != nil {
		log.Fatal(err)
	}
	pd, err := dev.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	cq, err := dev.CreateCQ(64, -1)
	if err != nil {
		log.Fatal(err)
	}
	qp, err := pd.CreateQP(rxe.QPInitAttr{Type: rxe.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: rxe.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		log.Fatal(err)
	}
	mr, err := pd.RegMR(make([]byte, 4096),
		rxe.AccessLocalWrite|rxe.AccessRemoteRead|rxe.AccessRemoteWrite)
	if err != nil {
		log.Fatal(err)
	}
	return side{dev, cq, qp, mr}
}

// post posts wr on s's QP.
func post(s side, wr rxe.SendWR) {
	if _, err := s.qp.PostSend(wr); err != nil {
		log.Fatal(err)
	}
}

func (s side) wait() rxe.WC {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wc := make([]rxe.WC, 1)
	if _, err := s.cq.Wait(ctx, wc); err != nil {
		log.Fatal(err)
	}
	return wc[0]
}

// Two devices joined by an in-memory pipe (use rxe.Listen on real
// addresses to cross a network): an RDMA WRITE, an RDMA READ and a SEND
// with immediate data over one RC connection.
func Example() {
	ca, cb := netdev.NewPipe()
	a, b := newSide(ca), newSide(cb)
	defer a.dev.Close()
	defer b.dev.Close()

	// Exchange connection information out of band, then connect.
	ia, ib := a.qp.Info(100), b.qp.Info(200)
	if err := a.qp.Connect(ia, ib, rxe.ConnectOptions{}); err != nil {
		log.Fatal(err)
	}
	if err := b.qp.Connect(ib, ia, rxe.ConnectOptions{}); err != nil {
		log.Fatal(err)
	}

	// RDMA WRITE: a's bytes land in b's buffer; b's CPU takes no part.
	// Nothing on b's side completes, so b reads the bytes after a call
	// that orders it after its device's accesses (QP.Query; across a
	// network, a later SEND's receive completion).
	copy(a.mr.Bytes(), "hello, RDMA")
	post(a, rxe.SendWR{ID: 1, Opcode: rxe.WRRDMAWrite, Flags: rxe.SendSignaled,
		SGList: []rxe.SGE{a.mr.SGE(0, 11)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
	wc := a.wait()
	b.qp.Query()
	fmt.Printf("write: %v, b holds %q\n", wc.Status, b.mr.Bytes()[:11])

	// RDMA READ: a fetches 6 bytes of b's buffer into its own at offset 100.
	copy(b.mr.Bytes()[50:], "remote")
	post(a, rxe.SendWR{ID: 2, Opcode: rxe.WRRDMARead, Flags: rxe.SendSignaled,
		SGList: []rxe.SGE{a.mr.SGE(100, 6)}, RemoteAddr: b.mr.Addr() + 50, RKey: b.mr.RKey()})
	wc = a.wait()
	fmt.Printf("read: %v, a holds %q\n", wc.Status, a.mr.Bytes()[100:106])

	// SEND with immediate: b posts a receive first.
	if _, err := b.qp.PostRecv(rxe.RecvWR{ID: 3, SGList: []rxe.SGE{b.mr.SGE(1000, 64)}}); err != nil {
		log.Fatal(err)
	}
	copy(a.mr.Bytes()[200:], "ping")
	post(a, rxe.SendWR{ID: 4, Opcode: rxe.WRSendWithImm, Flags: rxe.SendSignaled, Imm: 0xCAFE,
		SGList: []rxe.SGE{a.mr.SGE(200, 4)}})
	wc = a.wait()
	rwc := b.wait()
	fmt.Printf("send: %v; receive: %v %d bytes %q imm=%#x\n", wc.Status, rwc.Opcode, rwc.ByteLen,
		b.mr.Bytes()[1000:1000+rwc.ByteLen], rwc.Imm)

	// Output:
	// write: SUCCESS, b holds "hello, RDMA"
	// read: SUCCESS, a holds "remote"
	// send: SUCCESS; receive: RECV 4 bytes "ping" imm=0xcafe
}
