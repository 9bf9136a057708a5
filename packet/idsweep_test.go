package packet

import (
	"testing"
)

// TestRecoverEveryIPv4ID: for every IPv4 ID (small packets) and a sample
// of them (packets on both sides of the recovery's cached tail length),
// the ICRC of a packet rewritten for that ID checks, and RecoverIPv4ID
// finds the ID again.
func TestRecoverEveryIPv4ID(t *testing.T) {
	for _, plen := range []int{0, 1, 100, 8170, 8200, 9000} {
		buf := make([]byte, plen+64)
		h := Headers{BTH: BTHFields{Opcode: RCRDMAWriteMiddle, PKey: DefaultPKey, DestQP: 99, PSN: 5}}
		ph := testPH
		n, err := Build(buf, &h, make([]byte, plen), &ph)
		if err != nil {
			t.Fatal(err)
		}
		pkt := buf[:n]
		step := 1
		if plen > 1000 {
			step = 997
		}
		for id := 0; id < 65536; id += step {
			cp := append([]byte(nil), pkt...)
			RewriteIPv4ID(cp, 0, uint16(id))
			ph2 := ph
			ph2.IPID = uint16(id)
			if err := ph2.CheckICRC(cp); err != nil {
				t.Fatalf("len %d id %d: rewrite wrong", n, id)
			}
			got, ok := ph.RecoverIPv4ID(cp)
			if !ok || got != uint16(id) {
				t.Fatalf("len %d id %d: got %d %v", n, id, got, ok)
			}
		}
	}
}
