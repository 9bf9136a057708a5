package cm

import (
	"encoding/binary"
	"net/netip"
	"os"
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// The kernel-rxe rdma_cm capture: `ib_send_bw -R` between 10.77.0.3
// (client) and 10.77.0.2 (server), two connections. Its ten CM MADs, in
// order: REQ, REP, RTU (connection 1), REQ, REP, RTU (connection 2), the
// client's DREQ and the server's DREP for connection 2, the server's DREQ
// and the client's DREP for connection 1.
const capture = "../../testdata/captures/kernel-rxe_rdmacm_send_4KiB.pcap"

var (
	capClient = netip.MustParseAddr("10.77.0.3")
	capServer = netip.MustParseAddr("10.77.0.2")
)

type capMAD struct {
	src netip.Addr
	mad []byte
}

// captureMADs returns the MADs of the UD SEND_ONLY packets to QP1 in a
// classic little-endian Ethernet/IPv4 pcap.
func captureMADs(t testing.TB) []capMAD {
	b, err := os.ReadFile(capture)
	require.NoError(t, err)
	require.Equal(t, uint32(0xa1b2c3d4), binary.LittleEndian.Uint32(b))
	var out []capMAD
	for off := 24; off+16 <= len(b); {
		n := int(binary.LittleEndian.Uint32(b[off+8:]))
		f := b[off+16 : off+16+n]
		off += 16 + n
		if len(f) < 42 || binary.BigEndian.Uint16(f[12:]) != 0x0800 || f[23] != 17 || binary.BigEndian.Uint16(f[36:]) != 4791 {
			continue
		}
		p, err := packet.Parse(f[42:])
		require.NoError(t, err)
		if p.DestQP() == packet.GSIQPN {
			out = append(out, capMAD{netip.AddrFrom4([4]byte(f[26:30])), p.Payload()})
		}
	}
	require.Len(t, out, 10)
	return out
}

func ids(v ...uint32) func() uint32 {
	return func() uint32 { x := v[0]; v = v[1:]; return x }
}

// poll returns the one MAD the agent has to send, checking its destination.
func pollOne(t *testing.T, a *Agent, to netip.Addr) []byte {
	t.Helper()
	o, ok := a.Poll()
	require.True(t, ok, "a MAD to send")
	require.Equal(t, to, o.To)
	_, more := a.Poll()
	require.False(t, more)
	return o.MAD[:]
}

func event(t *testing.T, a *Agent, k EventKind) Event {
	t.Helper()
	e, ok := a.NextEvent()
	require.True(t, ok, "event %v", k)
	require.Equal(t, k, e.Kind)
	return e
}

// TestReplayServer feeds the client's MADs of the capture to our server
// agent, answering as the kernel's server did (same comm IDs, QPNs, PSNs,
// CA GUID, TID high word), and checks that every MAD we send is the
// capture's, byte for byte.
func TestReplayServer(t *testing.T) {
	m := captureMADs(t)
	a := NewAgent(Config{CAGUID: 0x505400fffe770002, TIDHigh: 2, NextCommID: ids(0xccfadc13, 0xc8fadc13)})
	require.NoError(t, a.Listen(packet.RDMACMServiceID(packet.RDMACMProtoTCP, 18515)))
	accept := func(req capMAD, qpn, psn uint32) ID {
		a.Receive(t0, req.src, req.mad)
		e := event(t, a, EventREQ)
		require.Equal(t, capClient, e.Peer)
		var ip packet.CMIPHeader
		require.NoError(t, ip.Decode(e.REQ.PrivateData[:]))
		require.Equal(t, capServer, ip.Dst)
		require.NoError(t, a.Accept(t0, e.ID, &packet.REP{LocalQPN: qpn, StartingPSN: psn, TargetACKDelay: 15, RNRRetryCount: 7}))
		return e.ID
	}
	c1 := accept(m[0], 0x3d, 0x37140f)
	require.Equal(t, m[1].mad, pollOne(t, a, capClient), "REP 1")
	a.Receive(t0, m[2].src, m[2].mad)
	event(t, a, EventEstablished)
	c2 := accept(m[3], 0x3e, 0x2a0db3)
	require.Equal(t, m[4].mad, pollOne(t, a, capClient), "REP 2")
	a.Receive(t0, m[5].src, m[5].mad)
	event(t, a, EventEstablished)
	require.Equal(t, StateEstablished, a.State(c2))

	a.Receive(t0, m[6].src, m[6].mad) // the client's DREQ for connection 2
	require.Equal(t, m[7].mad, pollOne(t, a, capClient), "DREP")
	require.Equal(t, c2, event(t, a, EventDisconnect).ID)
	require.NoError(t, a.Disconnect(t0, c1, nil))
	require.Equal(t, m[8].mad, pollOne(t, a, capClient), "DREQ")
	a.Receive(t0, m[9].src, m[9].mad)
	require.Equal(t, c1, event(t, a, EventDisconnected).ID)
	require.Equal(t, StateTimeWait, a.State(c1))
	require.Zero(t, a.Counters().Dropped)
}

// TestReplayClient does the same for our client agent: its REQs carry the
// kernel client's parameters, and its REQ, RTU, DREQ and DREP must be the
// capture's.
func TestReplayClient(t *testing.T) {
	m := captureMADs(t)
	a := NewAgent(Config{CAGUID: 0x505400fffe770003, TIDHigh: 2, NextCommID: ids(0x54088e95, 0x55088e95)})
	connect := func(req, rep, rtu capMAD) ID {
		var want packet.REQ
		_, msg, err := packet.DecodeCMHeader(req.mad)
		require.NoError(t, err)
		require.NoError(t, want.Decode(msg))
		params := want
		params.LocalCommID, params.LocalCAGUID = 0, 0 // the agent's to fill
		id, err := a.Connect(t0, capServer, &params)
		require.NoError(t, err)
		require.Equal(t, req.mad, pollOne(t, a, capServer), "REQ")
		a.Receive(t0, rep.src, rep.mad)
		e := event(t, a, EventREP)
		require.Equal(t, id, e.ID)
		require.NoError(t, a.ConfirmREP(id, nil))
		require.Equal(t, rtu.mad, pollOne(t, a, capServer), "RTU")
		return id
	}
	c1 := connect(m[0], m[1], m[2])
	c2 := connect(m[3], m[4], m[5])
	require.NoError(t, a.Disconnect(t0, c2, nil))
	require.Equal(t, m[6].mad, pollOne(t, a, capServer), "DREQ")
	a.Receive(t0, m[7].src, m[7].mad)
	require.Equal(t, c2, event(t, a, EventDisconnected).ID)
	a.Receive(t0, m[8].src, m[8].mad)
	require.Equal(t, m[9].mad, pollOne(t, a, capServer), "DREP")
	require.Equal(t, c1, event(t, a, EventDisconnect).ID)
	require.Zero(t, a.Counters().Dropped)
}
