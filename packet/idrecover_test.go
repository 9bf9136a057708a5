package packet

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRecoverIPv4ID(t *testing.T) {
	// The ConnectX-4 Lx CNP carries ID 0x718c with DF.
	d, err := ParseIP(loadVectors(t)[0].ip)
	require.NoError(t, err)
	ph := d.Pseudo
	ph.IPID = 0
	id, ok := ph.RecoverIPv4ID(d.Payload)
	require.True(t, ok)
	require.Equal(t, uint16(0x718c), id)

	r := rand.New(rand.NewPCG(7, 7))
	for _, s := range samples() {
		buf := make([]byte, 512)
		want := uint16(r.Uint32())
		ph := testPH
		ph.IPID = want
		n, err := Build(buf, &s.h, s.payload, &ph)
		require.NoError(t, err)
		pkt := buf[:n]
		ph.IPID = 0
		id, ok := ph.RecoverIPv4ID(pkt)
		require.True(t, ok, s.name)
		require.Equal(t, want, id, s.name)

		// Without DF (the pseudo-header assumes DF) or with a flipped bit
		// the packet is rejected, barring a 2^-16 coincidence.
		noDF := ph
		noDF.IPFlags = 0
		_, ok = noDF.RecoverIPv4ID(pkt)
		require.False(t, ok, s.name)
		pkt[len(pkt)-5] ^= 0x10
		_, ok = ph.RecoverIPv4ID(pkt)
		require.False(t, ok, s.name)
	}
}

// TestRecoverIPv4IDRejectsCorruption measures the false-accept rate: of
// many corrupted packets about 2^-16 may pass; far more would mean the
// recovery is too lenient.
func TestRecoverIPv4IDRejectsCorruption(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 99))
	buf := make([]byte, 2048)
	h := Headers{BTH: BTHFields{Opcode: RCRDMAWriteMiddle, PKey: DefaultPKey, DestQP: 99, PSN: 5}}
	ph := testPH
	ph.IPID = 0x1234
	n, err := Build(buf, &h, make([]byte, 1024), &ph)
	require.NoError(t, err)
	ph.IPID = 0
	accepted := 0
	for range 20000 {
		i := BTHSize + r.IntN(1024)
		bit := byte(1) << r.IntN(8)
		buf[i] ^= bit
		if _, ok := ph.RecoverIPv4ID(buf[:n]); ok {
			accepted++
		}
		buf[i] ^= bit
	}
	require.LessOrEqual(t, accepted, 3)
}

func TestRecoverIPv4IDIPv6(t *testing.T) {
	d, err := ParseIP(loadVectors(t)[2].ip)
	require.NoError(t, err)
	_, ok := d.Pseudo.RecoverIPv4ID(d.Payload)
	require.False(t, ok)
}

func BenchmarkRecoverIPv4ID4K(b *testing.B) {
	buf := make([]byte, 4096+64)
	h := Headers{BTH: BTHFields{Opcode: RCRDMAWriteMiddle, PKey: DefaultPKey, DestQP: 99, PSN: 5}}
	ph := testPH
	ph.IPID = 0xBEEF
	n, _ := Build(buf, &h, make([]byte, 4096), &ph)
	ph.IPID = 0
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := ph.RecoverIPv4ID(buf[:n]); !ok {
			b.Fatal("not recovered")
		}
	}
}

// BenchmarkRecoverIPv4IDSmall recovers the IDs of 2-byte RDMA WRITE ONLY
// packets as a UDP GSO send leaves them: IDs 1 to 63 in turn, so the
// delta to undo changes from packet to packet.
func BenchmarkRecoverIPv4IDSmall(b *testing.B) {
	const ids = 64
	pkts := make([][]byte, ids)
	h := Headers{BTH: BTHFields{Opcode: RCRDMAWriteOnly, PKey: DefaultPKey, DestQP: 99, PSN: 5},
		RETH: RETHFields{VA: 0x1000, RKey: 7, DMALen: 2}}
	ph := testPH
	for i := range pkts {
		pkts[i] = make([]byte, 64)
		ph.IPID = uint16(i)
		n, err := Build(pkts[i], &h, []byte{1, 2}, &ph)
		require.NoError(b, err)
		pkts[i] = pkts[i][:n]
	}
	ph.IPID = 0
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if id, ok := ph.RecoverIPv4ID(pkts[i%ids]); !ok || int(id) != i%ids {
			b.Fatal("not recovered")
		}
	}
}
