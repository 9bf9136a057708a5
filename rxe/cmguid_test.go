package rxe

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/cm"
	"github.com/stretchr/testify/require"
)

// reqOf has device d's connection manager send a REQ from QP qpn and
// returns it as the wire carries it.
func reqOf(t *testing.T, d *Device, to netip.Addr, commID uint32, qpn uint32) (packet.REQ, [packet.MADSize]byte) {
	t.Helper()
	g := d.gsiOf()
	req := packet.REQ{ServiceID: packet.RDMACMServiceID(packet.RDMACMProtoTCP, 7471), LocalQPN: qpn,
		RemoteCMResponseTimeout: 20, LocalCMResponseTimeout: 20, MaxCMRetries: 15,
		Primary: packet.CMPath{LocalACKTimeout: 14}}
	_, err := g.agent.Connect(time.Unix(1000, 0), to, &req)
	require.NoError(t, err)
	o, ok := g.agent.Poll()
	require.True(t, ok)
	_, msg, err := packet.DecodeCMHeader(o.MAD[:])
	require.NoError(t, err)
	var got packet.REQ
	require.NoError(t, got.Decode(msg))
	return got, o.MAD
}

// TestCAGUIDUniquePerHost: two hosts whose IPv6 addresses share their
// interface identifier (2001:db8:1::5 and 2001:db8:2::5, or any two hosts
// numbered ::5 in different subnets) must not announce the same CA GUID:
// the passive CM keys duplicate and stale-connection detection on
// (CA GUID, comm ID) and (CA GUID, QPN), and gorxe's QPNs start at 0x11 on
// every device.
func TestCAGUIDUniquePerHost(t *testing.T) {
	server := netip.MustParseAddr("2001:db8:9::1")
	a := &Device{addr: netip.MustParseAddr("2001:db8:1::5"), port: 4791}
	b := &Device{addr: netip.MustParseAddr("2001:db8:2::5"), port: 4791}
	reqA, madA := reqOf(t, a, server, 0, firstQPN)
	reqB, madB := reqOf(t, b, server, 0, firstQPN)

	// The consequence at a passive side: host B's first connection is
	// refused as stale, and host A's established one torn down.
	srv := cm.NewAgent(cm.Config{CAGUID: 0x5E, TIDHigh: 2, PacketLifeTime: 12})
	require.NoError(t, srv.Listen(reqA.ServiceID))
	now := time.Unix(1000, 0)
	srv.Receive(now, a.addr, madA[:])
	e, ok := srv.NextEvent()
	require.True(t, ok)
	require.Equal(t, cm.EventREQ, e.Kind)
	srv.Receive(now, b.addr, madB[:])
	e, ok = srv.NextEvent()
	var reason string
	if o, sent := srv.Poll(); sent {
		h, msg, _ := packet.DecodeCMHeader(o.MAD[:])
		if packet.CMAttr(h.AttrID) == packet.AttrREJ {
			var rej packet.REJ
			_ = rej.Decode(msg)
			reason = rej.Reason.String()
		}
	}
	require.Equal(t, caGUID(a.addr, a.port), reqA.LocalCAGUID, "the REQ carries the device's CA GUID")
	require.NotEqual(t, reqA.LocalCAGUID, reqB.LocalCAGUID, "hosts %v and %v announce the same CA GUID %#x", a.addr, b.addr, reqA.LocalCAGUID)
	require.True(t, ok && e.Kind == cm.EventREQ, "host B's REQ is not reported to the listener; the server sent REJ %q", reason)
}

// TestCAGUIDDistinct: devices on different addresses or ports have
// different CA GUIDs (TestCAGUIDUniquePerHost checks that the REQ carries
// it), and one address and port always the same one (a
// restarted device is the same node to a peer's CM).
func TestCAGUIDDistinct(t *testing.T) {
	guid := func(addr string, port uint16) uint64 { return caGUID(netip.MustParseAddr(addr), port) }
	seen := map[uint64]string{}
	for _, c := range []struct {
		addr string
		port uint16
	}{
		{"192.0.2.1", 4791}, {"192.0.2.2", 4791}, {"192.0.2.1", 4792}, {"198.51.100.1", 4791},
		{"2001:db8:1::5", 4791}, {"2001:db8:2::5", 4791}, {"fe80::5", 4791}, {"2001:db8:1::5", 4792},
	} {
		g := guid(c.addr, c.port)
		key := fmt.Sprintf("%s:%d", c.addr, c.port)
		require.Empty(t, seen[g], "%s and %s announce the same CA GUID %#x", key, seen[g], g)
		seen[g] = key
		require.Equal(t, g, guid(c.addr, c.port), "%s: the same GUID every time", key)
		require.NotZero(t, g&0x0200_0000_0000_0000, "%s: the locally administered bit", key)
	}
}
