//go:build linux

package rxe

import (
	"fmt"
	"net/netip"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/netns"
	"github.com/gorxe/gorxe/packet"
)

// TestQdiscLimitBelowGSOBuffer runs WRITE, READ and SEND of 64 KiB and
// 1 MiB between two devices in two network namespaces over a veth pair
// (MTU 9000, RoCE MTU 4096) whose egress on both ends is docs/seed002.md's
// tbf: 1 Gbit/s with a 32 KiB queue, smaller than a GSO buffer of 15
// datagrams of 4 KiB. Such a qdisc drops a full GSO buffer whole, however
// empty its queue, and reports ENOBUFS (a local drop): each must complete,
// byte-exact, the devices sending smaller GSO buffers after a refusal
// (netdev's shrinkGSO), not the same buffer again until the retry budget
// ends in RETRY_EXC_ERR.
func TestQdiscLimitBelowGSOBuffer(t *testing.T) {
	if err := netns.Check("tc"); err != nil {
		t.Skip(err)
	}
	checkGoroutines(t)
	p, err := netns.NewPair(fmt.Sprintf("gorxe-tbf-%d", os.Getpid()), 207)
	require.NoError(t, err)
	defer p.Close()
	for _, side := range [][2]string{{p.A, p.IfA}, {p.B, p.IfB}} {
		_, err := netns.Command("ip", "-n", side[0], "link", "set", side[1], "mtu", "9000")
		require.NoError(t, err)
		_, err = netns.Command("tc", "-n", side[0], "qdisc", "add", "dev", side[1], "root",
			"tbf", "rate", "1gbit", "burst", "64kb", "limit", "32kb")
		require.NoError(t, err)
	}
	var da, db *Device
	open := func(addr netip.Addr, name string, d **Device) func() error {
		return func() (err error) {
			*d, err = Listen(netip.AddrPortFrom(addr, packet.UDPPort), Options{Name: name, LinkMTU: 9000})
			return err
		}
	}
	require.NoError(t, netns.In(p.A, open(p.AddrA, "rxe-a", &da)))
	defer da.Close()
	require.NoError(t, netns.In(p.B, open(p.AddrB, "rxe-b", &db)))
	defer db.Close()
	a, b := newEnd(t, da, testBufSize), newEnd(t, db, testBufSize)
	connect(t, a, b, MTU4096)
	seed := uint64(0)
	for _, n := range []int{64 << 10, 1 << 20} {
		for _, op := range []WROpcode{WRRDMAWrite, WRRDMARead, WRSend} {
			for range 4 {
				seed++
				if !t.Run(fmt.Sprintf("%v/%d/%d", op, n, seed), func(t *testing.T) { transfer(t, a, b, op, n, seed) }) {
					return
				}
			}
		}
	}
	t.Logf("local drops: rxe-a %d, rxe-b %d", da.Counters().LocalDrops, db.Counters().LocalDrops)
}
