package cm

import (
	"encoding/binary"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// TestSIDRREQRefused: a SIDR_REQ (an rdma_cm UD peer resolving a service,
// IBA 12.11) for a service no ListenSIDR took is answered at once with a
// SIDR_REP of status "service ID not supported", in its transaction, as
// kernel cm_sidr_req_handler answers one that no listener takes, so that
// the peer's rdma_connect fails at once rather than after all its retries.
// A service only Listen took (connections) is no UD service.
func TestSIDRREQRefused(t *testing.T) {
	for _, sid := range []uint64{
		packet.RDMACMServiceID(packet.RDMACMProtoUDP, 7471), // nobody listens
		service, // listened on for connections only
	} {
		a := NewAgent(Config{CAGUID: 0x5E, TIDHigh: 2})
		require.NoError(t, a.Listen(service))
		require.NoError(t, a.ListenSIDR(packet.RDMACMServiceID(packet.RDMACMProtoUDP, 7472)))
		req := packet.SIDRREQ{RequestID: 0x1234abcd, PKey: 0xFFFF, ServiceID: sid}
		copy(req.PrivateData[:], "private")
		var mad [packet.MADSize]byte
		packet.EncodeCM(mad[:], 0x0000000702030405, &req)
		a.Receive(t0, clientAddr, mad[:])

		o, attr, msg := pollMAD(t, a, "a SIDR_REP")
		require.Equal(t, clientAddr, o.To)
		require.Equal(t, packet.AttrSIDRREP, attr)
		h, _, err := packet.DecodeCMHeader(o.MAD[:])
		require.NoError(t, err)
		require.Equal(t, uint64(0x0000000702030405), h.TID, "the SIDR_REQ's transaction")
		require.Equal(t, uint8(packet.MethodSend), h.Method)
		var rep packet.SIDRREP
		require.NoError(t, rep.Decode(msg))
		require.Equal(t, packet.SIDRREP{RequestID: 0x1234abcd, Status: packet.SIDRServiceIDNotSup, ServiceID: sid}, rep)
		_, more := a.Poll()
		require.False(t, more)
		_, ev := a.NextEvent()
		require.False(t, ev, "no event: nothing for the consumer")
		require.Zero(t, a.Len(), "no connection kept")
		require.Equal(t, uint64(1), a.Counters().RejectsSent)
	}
}

// TestSIDRResolve: a resolution over a wire that loses, duplicates and
// delays MADs (IBA 12.11; kernel ib_send_cm_sidr_req, cm_sidr_req_handler,
// cm_sidr_rep_handler). The client resends its SIDR_REQ every sidrWait up
// to sidrRetries times; the server drops a duplicate SIDR_REQ while its
// consumer has not answered and reports one that comes after the answer
// as a new request; the client takes the first SIDR_REP and drops the
// others; when every try is lost the client reports a timeout and sends
// nothing more. Neither side keeps anything afterwards.
func TestSIDRResolve(t *testing.T) {
	type fates map[string]fate // "client SIDR_REQ#2" → fate; the rest are delivered
	tests := []struct {
		name        string
		fates       fates
		log         []string
		client      []EventKind
		serverREQs  int // EventSIDRREQ the server's consumer saw
		retransmits uint64
		dupServer   uint64 // SIDR_REQs the server dropped as duplicates
		dropClient  uint64 // SIDR_REPs the client dropped
	}{
		{name: "clean", log: []string{"client SIDR_REQ", "server SIDR_REP"},
			client: []EventKind{EventSIDRREP}, serverREQs: 1},
		{name: "SIDR_REQ lost", fates: fates{"client SIDR_REQ#1": drop},
			log:    []string{"client SIDR_REQ (lost)", "client SIDR_REQ", "server SIDR_REP"},
			client: []EventKind{EventSIDRREP}, serverREQs: 1, retransmits: 1},
		{name: "SIDR_REP lost: the resent SIDR_REQ is a new request", fates: fates{"server SIDR_REP#1": drop},
			log:    []string{"client SIDR_REQ", "server SIDR_REP (lost)", "client SIDR_REQ", "server SIDR_REP"},
			client: []EventKind{EventSIDRREP}, serverREQs: 2, retransmits: 1},
		{name: "SIDR_REQ twice", fates: fates{"client SIDR_REQ#1": dup},
			log:    []string{"client SIDR_REQ (twice)", "server SIDR_REP"},
			client: []EventKind{EventSIDRREP}, serverREQs: 1, dupServer: 1},
		{name: "SIDR_REP twice", fates: fates{"server SIDR_REP#1": dup},
			log:    []string{"client SIDR_REQ", "server SIDR_REP (twice)"},
			client: []EventKind{EventSIDRREP}, serverREQs: 1, dropClient: 1},
		{name: "SIDR_REQ late: the retry crosses it", fates: fates{"client SIDR_REQ#1": late},
			// The late SIDR_REQ arrives as the client's timer fires: the
			// resent one finds it waiting for the server's consumer and
			// is dropped as a duplicate; one SIDR_REP answers both.
			log:    []string{"client SIDR_REQ (late)", "client SIDR_REQ", "server SIDR_REP"},
			client: []EventKind{EventSIDRREP}, serverREQs: 1, retransmits: 1, dupServer: 1},
		{name: "SIDR_REP late: it comes as the timer fires, before the retry", fates: fates{"server SIDR_REP#1": late},
			log:    []string{"client SIDR_REQ", "server SIDR_REP (late)"},
			client: []EventKind{EventSIDRREP}, serverREQs: 1},
		{name: "every SIDR_REQ lost", fates: fates{"client SIDR_REQ#1": drop, "client SIDR_REQ#2": drop, "client SIDR_REQ#3": drop},
			log:    []string{"client SIDR_REQ (lost)", "client SIDR_REQ (lost)", "client SIDR_REQ (lost)"},
			client: []EventKind{EventTimeout}, retransmits: sidrRetries},
		{name: "every SIDR_REP lost", fates: fates{"server SIDR_REP#1": drop, "server SIDR_REP#2": drop, "server SIDR_REP#3": drop},
			log: []string{"client SIDR_REQ", "server SIDR_REP (lost)", "client SIDR_REQ", "server SIDR_REP (lost)",
				"client SIDR_REQ", "server SIDR_REP (lost)"},
			client: []EventKind{EventTimeout}, serverREQs: 3, retransmits: sidrRetries},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWire(t)
			w.fate = func(from string, attr packet.CMAttr, n int) fate {
				return tc.fates[from+" "+attr.String()+"#"+string(rune('0'+n))]
			}
			id := w.resolve()
			w.settle()
			require.Equal(t, tc.log, w.log)
			require.Equal(t, tc.client, w.kinds("client"))
			require.Len(t, w.events["server"], tc.serverREQs)
			for _, e := range w.events["server"] {
				require.Equal(t, EventSIDRREQ, e.Kind)
				require.Equal(t, clientAddr, e.Peer)
				require.Equal(t, *testSIDRREQ(), func() packet.SIDRREQ { r := *e.SIDRREQ; r.RequestID = 0; return r }())
				require.Equal(t, uint32(id), e.SIDRREQ.RequestID, "the request ID is the client's ID")
			}
			ev := w.events["client"][0]
			require.Equal(t, id, ev.ID)
			require.Equal(t, serverAddr, ev.Peer)
			if ev.Kind == EventSIDRREP {
				require.Equal(t, packet.SIDRREP{RequestID: uint32(id), Status: packet.SIDRValid, QPN: 0x33, QKey: 0x01234567,
					ServiceID: udService}, *ev.SIDRREP)
			} else {
				require.Equal(t, packet.RejTimeout, ev.Reason)
			}
			require.Equal(t, tc.retransmits, w.client.Counters().Retransmits)
			require.Equal(t, tc.dupServer, w.server.Counters().Duplicates)
			require.Equal(t, tc.dropClient, w.client.Counters().Dropped)
			require.Zero(t, w.client.Len())
			require.Zero(t, w.server.Len())
			require.Empty(t, w.server.bySIDR)
			require.Zero(t, w.server.Counters().RejectsSent)
		})
	}
}

// TestSIDRTimeout: the client sends 1 + retries SIDR_REQs, sidrWait apart,
// in the transaction its ID names (kernel ib_cm's TID layout), each
// carrying the same request, and reports the timeout one wait after the
// last; nothing is sent then.
func TestSIDRTimeout(t *testing.T) {
	a := NewAgent(Config{CAGUID: 0xC1, TIDHigh: 1})
	id, err := a.ResolveSIDR(t0, serverAddr, testSIDRREQ(), sidrWait, sidrRetries)
	require.NoError(t, err)
	require.Equal(t, StateSIDRREQSent, a.State(id))
	now := t0
	for i := 0; i <= sidrRetries; i++ {
		o, attr, msg := pollMAD(t, a, "a SIDR_REQ")
		require.Equal(t, packet.AttrSIDRREQ, attr)
		require.Equal(t, serverAddr, o.To)
		h, _, err := packet.DecodeCMHeader(o.MAD[:])
		require.NoError(t, err)
		require.Equal(t, uint64(1)<<32|uint64(id)<<24, h.TID)
		var req packet.SIDRREQ
		require.NoError(t, req.Decode(msg))
		want := *testSIDRREQ()
		want.RequestID = uint32(id)
		require.Equal(t, want, req)
		d, ok := a.Deadline()
		require.True(t, ok)
		require.Equal(t, now.Add(sidrWait), d)
		a.Tick(d.Add(-time.Nanosecond))
		_, early := a.Poll()
		require.False(t, early, "nothing before the wait ends")
		now = d
		a.Tick(now)
	}
	e, ok := a.NextEvent()
	require.True(t, ok)
	require.Equal(t, Event{Kind: EventTimeout, ID: id, Peer: serverAddr, Reason: packet.RejTimeout}, e)
	_, sent := a.Poll()
	require.False(t, sent, "a SIDR has no REJ")
	require.Zero(t, a.Len())
	_, ok = a.Deadline()
	require.False(t, ok)
}

// TestSIDRDecisions: what the consumers' calls do with a resolution, and
// what they refuse.
func TestSIDRDecisions(t *testing.T) {
	pending := func(t *testing.T) (*wire, ID) {
		w := newWire(t)
		w.autoREQ = false
		w.resolve()
		require.Len(t, w.events["server"], 1)
		sid := w.serverID()
		require.Equal(t, StateSIDRREQRcvd, w.server.State(sid))
		return w, sid
	}
	t.Run("answer with private data and additional information", func(t *testing.T) {
		w, sid := pending(t)
		rep := testSIDRREP()
		rep.AddInfoLen = 2
		copy(rep.AddInfo[:], "ai")
		copy(rep.PrivateData[:], "hello")
		require.NoError(t, w.server.AnswerSIDR(sid, rep))
		require.ErrorIs(t, w.server.AnswerSIDR(sid, rep), ErrUnknownID, "answered once")
		w.pump()
		got := w.events["client"][0].SIDRREP
		require.Equal(t, "hello", string(clonePD(got.PrivateData[:])))
		require.Equal(t, "ai", string(got.AddInfo[:got.AddInfoLen]))
	})
	t.Run("refusing status", func(t *testing.T) {
		w, sid := pending(t)
		require.NoError(t, w.server.AnswerSIDR(sid, &packet.SIDRREP{Status: packet.SIDRNoQP}))
		w.pump()
		require.Equal(t, []EventKind{EventSIDRREP}, w.kinds("client"))
		require.Equal(t, uint8(packet.SIDRNoQP), w.events["client"][0].SIDRREP.Status)
		require.Zero(t, w.client.Len())
	})
	t.Run("out of range", func(t *testing.T) {
		w, sid := pending(t)
		for _, rep := range []packet.SIDRREP{{QPN: 1 << 24}, {VendorID: 1 << 24},
			{AddInfoLen: packet.SIDRREPAddInfoSize + 1}, {Status: packet.SIDRUnsupportedVer + 1}} {
			require.ErrorIs(t, w.server.AnswerSIDR(sid, &rep), ErrInvalid, "%+v", rep)
		}
		_, sent := w.server.Poll()
		require.False(t, sent)
		require.Equal(t, StateSIDRREQRcvd, w.server.State(sid))
		_, err := w.client.ResolveSIDR(w.now, serverAddr, testSIDRREQ(), 0, 1)
		require.ErrorIs(t, err, ErrInvalid)
	})
	t.Run("connection calls refuse a resolution", func(t *testing.T) {
		w, sid := pending(t)
		cid := ID(1)
		require.Equal(t, StateSIDRREQSent, w.client.State(cid))
		require.ErrorIs(t, w.server.Accept(w.now, sid, testREP()), ErrState)
		require.ErrorIs(t, w.server.Reject(sid, packet.RejConsumerReject, nil), ErrState)
		require.ErrorIs(t, w.server.Established(sid), ErrState)
		require.ErrorIs(t, w.server.Disconnect(w.now, sid, nil), ErrState)
		require.ErrorIs(t, w.client.ConfirmREP(cid, nil), ErrState)
		require.ErrorIs(t, w.client.AnswerSIDR(cid, testSIDRREP()), ErrState)
		_, sent := w.server.Poll()
		require.False(t, sent)
	})
	t.Run("abort", func(t *testing.T) {
		// The server's consumer gives up: status "rejected" (kernel
		// cm_destroy_id in SIDR_REQ received).
		w, sid := pending(t)
		require.NoError(t, w.server.Abort(w.now, sid))
		w.pump()
		require.Equal(t, []EventKind{EventSIDRREP}, w.kinds("client"))
		require.Equal(t, uint8(packet.SIDRRejected), w.events["client"][0].SIDRREP.Status)
		// The client's consumer gives up: nothing is sent, a late answer
		// is dropped.
		w = newWire(t)
		w.fate = func(from string, _ packet.CMAttr, _ int) fate {
			if from == "server" {
				return late
			}
			return deliver
		}
		cid := w.resolve()
		require.NoError(t, w.client.Abort(w.now, cid))
		_, sent := w.client.Poll()
		require.False(t, sent)
		w.settle()
		require.Empty(t, w.events["client"])
		require.Equal(t, uint64(1), w.client.Counters().Dropped, "the late SIDR_REP")
		require.Zero(t, w.client.Len())
	})
	t.Run("shutdown", func(t *testing.T) {
		w, _ := pending(t)
		w.server.Shutdown(w.now)
		w.client.Shutdown(w.now) // its resolution goes silently
		_, sent := w.client.Poll()
		require.False(t, sent)
		w.pump()
		require.Zero(t, w.server.Len())
		require.Zero(t, w.client.Len())
		require.Empty(t, w.events["client"], "the client had shut down when the server's refusal came")
		require.Equal(t, []string{"client SIDR_REQ", "server SIDR_REP"}, w.log)
	})
	t.Run("listen twice, unlisten", func(t *testing.T) {
		w := newWire(t)
		require.ErrorIs(t, w.server.ListenSIDR(udService), ErrListening)
		w.server.UnlistenSIDR(udService)
		w.resolve()
		require.Equal(t, []EventKind{EventSIDRREP}, w.kinds("client"))
		require.Equal(t, uint8(packet.SIDRServiceIDNotSup), w.events["client"][0].SIDRREP.Status)
		// A REQ for a service ListenSIDR took is rejected as unlistened.
		require.NoError(t, w.server.ListenSIDR(service+1))
		req := testREQ()
		req.ServiceID = service + 1
		_, err := w.client.Connect(w.now, serverAddr, req)
		require.NoError(t, err)
		w.pump()
		require.Equal(t, EventRejected, w.events["client"][1].Kind)
		require.Equal(t, packet.RejInvalidServiceID, w.events["client"][1].Reason)
	})
}

// TestSIDRBeyondMaxConns: a SIDR_REQ that comes while the server's agent
// tracks Config.MaxConns connections and resolutions is dropped without a
// SIDR_REP, as kernel cm_sidr_req_handler drops one it cannot allocate a
// cm_id for; the client resends it on its timer, and the resent one is
// reported once the table has room.
func TestSIDRBeyondMaxConns(t *testing.T) {
	w := newWire(t)
	w.autoREQ = false
	w.server.cfg.MaxConns = 1
	first := w.resolve()
	second := w.resolve()
	require.Equal(t, []string{"client SIDR_REQ", "client SIDR_REQ"}, w.log, "no SIDR_REP for the second")
	require.Len(t, w.events["server"], 1)
	require.Equal(t, first, ID(w.events["server"][0].SIDRREQ.RequestID))
	require.Empty(t, w.events["client"])
	require.Equal(t, uint64(1), w.server.Counters().Dropped)
	require.Zero(t, w.server.Counters().RejectsSent)
	require.Equal(t, 1, w.server.Len())

	// The first is answered; the second's next try finds room.
	require.NoError(t, w.server.AnswerSIDR(w.serverID(), testSIDRREP()))
	w.pump()
	w.advance(sidrWait)
	require.Len(t, w.events["server"], 2)
	require.Equal(t, second, ID(w.events["server"][1].SIDRREQ.RequestID))
	require.NoError(t, w.server.AnswerSIDR(w.events["server"][1].ID, testSIDRREP()))
	w.pump()
	w.settle()
	require.Equal(t, []EventKind{EventSIDRREP, EventSIDRREP}, w.kinds("client"))
	for i, id := range []ID{first, second} {
		require.Equal(t, id, w.events["client"][i].ID)
		require.Equal(t, uint8(packet.SIDRValid), w.events["client"][i].SIDRREP.Status)
	}
	require.Equal(t, uint64(1), w.client.Counters().Retransmits)
	require.Zero(t, w.client.Len())
	require.Zero(t, w.server.Len())
}

// TestSIDRREPLayout: the SIDR_REP AnswerSIDR sends has each field where
// IBA 12.11.2 table 120 puts it, as kernel ib_cm lays it out
// (ibta_vol1_c12.h: the vendor ID's bits 23–8 at bytes 6–7, its bits 7–0
// at byte 11, the 24-bit QPN at bytes 8–10, the additional information at
// byte 24, the private data at byte 96), and the client decodes every
// field back. The vendor ID takes all 24 bits; kernel cm_format_sidr_rep
// writes its bits 15–0 only (byte 6 stays 0), the same bytes for any
// vendor ID below 2^16, such as the 0x0002C9 of rdma-core's mlx5 ECE.
func TestSIDRREPLayout(t *testing.T) {
	for _, tc := range []struct {
		vendorID   uint32
		bytes6to11 string
	}{
		{0x0002C9, "0002 123456 c9"},
		{0xABCDEF, "abcd 123456 ef"},
	} {
		w := newWire(t)
		w.autoREQ = false
		id := w.resolve()
		rep := &packet.SIDRREP{Status: packet.SIDRValid, AddInfoLen: 2, VendorID: tc.vendorID, QPN: 0x123456, QKey: 0x01234567}
		copy(rep.AddInfo[:], "ai")
		copy(rep.PrivateData[:], "pd")
		require.NoError(t, w.server.AnswerSIDR(w.serverID(), rep))
		o, attr, msg := pollMAD(t, w.server, "the SIDR_REP")
		require.Equal(t, packet.AttrSIDRREP, attr)
		want := make([]byte, packet.CMDataSize)
		binary.BigEndian.PutUint32(want, uint32(id))
		want[4], want[5] = packet.SIDRValid, 2
		six, err := hex.DecodeString(strings.ReplaceAll(tc.bytes6to11, " ", ""))
		require.NoError(t, err)
		copy(want[6:], six)
		binary.BigEndian.PutUint64(want[12:], udService)
		binary.BigEndian.PutUint32(want[20:], 0x01234567)
		copy(want[24:], "ai")
		copy(want[96:], "pd")
		require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(msg), "vendor ID %#x", tc.vendorID)

		w.client.Receive(w.now, serverAddr, o.MAD[:])
		e, ok := w.client.NextEvent()
		require.True(t, ok)
		got := *rep
		got.RequestID, got.ServiceID = uint32(id), udService
		require.Equal(t, got, *e.SIDRREP)
	}
}
