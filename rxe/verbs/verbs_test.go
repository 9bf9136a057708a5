package verbs

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestValuesMatchLibibverbs pins the numeric values to rdma-core's verbs.h.
func TestValuesMatchLibibverbs(t *testing.T) {
	require.Equal(t, 5, int(WCWRFlushErr))
	require.Equal(t, 12, int(WCRetryExcErr))
	require.Equal(t, 21, int(WCGeneralErr))
	require.Equal(t, 128, int(WCRecv))
	require.Equal(t, 129, int(WCRecvRDMAWithImm))
	require.Equal(t, 4, int(WRRDMARead))
	require.Equal(t, 15, int(WRAtomicWrite))
	require.Equal(t, 6, int(QPSErr))
	require.Equal(t, 2, int(QPTypeRC))
	require.Equal(t, 15, int(EventSRQLimitReached))
	require.Equal(t, AccessFlags(0x200), AccessFlushPersistent)
}

func TestStrings(t *testing.T) {
	tests := []struct{ got, want string }{
		{WCWRFlushErr.String(), "WR_FLUSH_ERR"},
		{WCStatus(99).String(), "WC_STATUS_99"},
		{WCRecvRDMAWithImm.String(), "RECV_RDMA_WITH_IMM"},
		{WCOpcode(77).String(), "WC_OPCODE_77"},
		{WRAtomicFetchAndAdd.String(), "ATOMIC_FETCH_AND_ADD"},
		{WROpcode(12).String(), "WR_12"},
		{QPSRTS.String(), "RTS"},
		{QPState(9).String(), "QPS_9"},
		{QPTypeUD.String(), "UD"},
		{EventQPLastWQEReached.String(), "QP_LAST_WQE_REACHED"},
		{MTU1024.String(), "1024"},
		{MTU(0).String(), "MTU_0"},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, tc.got)
	}
}

func TestMTU(t *testing.T) {
	require.Equal(t, 256, MTU256.Bytes())
	require.Equal(t, 4096, MTU4096.Bytes())
	require.Zero(t, MTU(6).Bytes())
	require.Equal(t, MTU1024, MTUFromBytes(1500-80))
	require.Equal(t, MTU4096, MTUFromBytes(65536))
	require.Equal(t, MTU(0), MTUFromBytes(255))
}

func TestWROpcodes(t *testing.T) {
	require.Equal(t, WCRDMAWrite, WCOpcodeOf(WRRDMAWriteWithImm))
	require.Equal(t, WCSend, WCOpcodeOf(WRSendWithInv))
	require.Equal(t, WCCompSwap, WCOpcodeOf(WRAtomicCmpAndSwp))
	require.True(t, WRFlush.IsReadOrAtomic())
	require.False(t, WRSend.IsReadOrAtomic())
	require.True(t, WCRecv.IsRecv())
	require.False(t, WCRDMARead.IsRecv())
	wr := SendWR{SGList: []SGE{{Length: 3}, {Length: 4}}}
	require.Equal(t, uint64(7), wr.Length())
	wr.Flags, wr.InlineData = SendInline, []byte("ab")
	require.Equal(t, uint64(2), wr.Length())
	require.Equal(t, uint64(9), (&RecvWR{SGList: []SGE{{Length: 9}}}).Length())
}
