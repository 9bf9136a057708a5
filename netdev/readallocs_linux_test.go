package netdev

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadBatchAllocs: receiving allocates nothing per datagram (issue 14's
// zero allocations on UDP), with and without GRO, on a socket bound to
// loopback and to the wildcard address (whose datagrams carry IP_PKTINFO),
// through ReadBatch and TryReadBatch.
func TestReadBatchAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("race")
	}
	for _, fam := range families {
		for _, gro := range []bool{false, true} {
			for _, bind := range []string{"lo", "any"} {
				t.Run(fam.name+map[bool]string{false: "/nogro", true: "/gro"}[gro]+"/"+bind, func(t *testing.T) {
					if fam.needsIPv6 {
						skipNoIPv6(t)
					}
					a := fam.lo
					if bind == "any" {
						a = fam.any
					}
					rx := listen(t, a, Options{NoGRO: !gro})
					tx := listen(t, fam.lo, Options{RewriteIPv4ID: keepID})
					to := netip.AddrPortFrom(fam.lo, rx.LocalAddr().Port())
					msgs := gsoRun(to, 64, 100)
					rmsgs := newMsgs(64, 2048)
					readers := map[string]func() (int, error){
						"ReadBatch": func() (int, error) { return rx.ReadBatch(rmsgs) },
						"TryReadBatch": func() (int, error) {
							for {
								n, err := rx.TryReadBatch(rmsgs)
								if n > 0 || err != nil {
									return n, err
								}
							}
						},
					}
					for name, read := range readers {
						round := func() {
							if _, err := tx.WriteBatch(msgs); err != nil {
								t.Fatal(err)
							}
							for got := 0; got < 64; {
								n, err := read()
								if err != nil {
									t.Fatal(err)
								}
								got += n
							}
						}
						round()
						allocs := testing.AllocsPerRun(20, round)
						require.Zero(t, allocs, "%s: allocations per 64-datagram round", name)
					}
				})
			}
		}
	}
}
