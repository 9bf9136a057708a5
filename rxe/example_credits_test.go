package rxe_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/rxe"
)

// End-to-end credits (Options.Credits) with a receiver that keeps only 4
// receive WQEs posted and reposts them after it has used them: the sender
// posts 16 SENDs at once, and none draws an RNR NAK. The requester sends
// what the receiver's credits allow, waits, and resumes on the credit
// update the receiver's PostRecv makes its responder send.
func Example_credits() {
	open := func(conn netdev.Conn) (*rxe.Device, *rxe.CQ, *rxe.QP, *rxe.MR) {
		dev, err := rxe.Open(conn, rxe.Options{OwnConn: true, Credits: true, CompVectors: 1})
		if err != nil {
			log.Fatal(err)
		}
		pd, _ := dev.AllocPD()
		cq, _ := dev.CreateCQ(64, -1)
		qp, err := pd.CreateQP(rxe.QPInitAttr{Type: rxe.QPTypeRC, SendCQ: cq, RecvCQ: cq,
			Cap: rxe.QPCap{MaxSendWR: 16, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			log.Fatal(err)
		}
		mr, err := pd.RegMR(make([]byte, 4096), rxe.AccessLocalWrite)
		if err != nil {
			log.Fatal(err)
		}
		return dev, cq, qp, mr
	}
	ca, cb := netdev.NewPipe()
	da, cqa, qpa, mra := open(ca)
	db, cqb, qpb, mrb := open(cb)
	defer da.Close()
	defer db.Close()
	ia, ib := qpa.Info(1), qpb.Info(2)
	if err := qpa.Connect(ia, ib, rxe.ConnectOptions{}); err != nil {
		log.Fatal(err)
	}
	if err := qpb.Connect(ib, ia, rxe.ConnectOptions{}); err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	repost := func() {
		for i := range 4 {
			if _, err := qpb.PostRecv(rxe.RecvWR{ID: uint64(i), SGList: []rxe.SGE{mrb.SGE(64*i, 64)}}); err != nil {
				log.Fatal(err)
			}
		}
	}
	repost()
	for i := range 16 {
		if _, err := qpa.PostSend(rxe.SendWR{ID: uint64(i), Opcode: rxe.WRSend, Flags: rxe.SendSignaled,
			SGList: []rxe.SGE{mra.SGE(0, 32)}}); err != nil {
			log.Fatal(err)
		}
	}
	wcs := make([]rxe.WC, 16)
	for got := 0; got < 16; {
		n, err := cqb.Wait(ctx, wcs[:4-got%4])
		if err != nil {
			log.Fatal(err)
		}
		if got += n; got%4 == 0 && got < 16 {
			repost() // the receiver is ready for 4 more
		}
	}
	for got := 0; got < 16; {
		n, err := cqa.Wait(ctx, wcs[got:])
		if err != nil {
			log.Fatal(err)
		}
		got += n
	}
	s, r := qpa.Counters(), qpb.Counters()
	fmt.Printf("16 SENDs received; RNR NAKs sent %d, received %d\n", r.Responder.SendRNRErr, s.Requester.RcvdRNRErr)

	// Output:
	// 16 SENDs received; RNR NAKs sent 0, received 0
}
