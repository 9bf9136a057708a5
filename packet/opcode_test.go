package packet

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOpcodeTableRC checks every RC opcode against a table written by hand
// from IBA 9.2.1 table 38 (and the header list of protocol reference §1.6).
func TestOpcodeTableRC(t *testing.T) {
	tests := []struct {
		op      Opcode
		name    string
		hdrs    []Hdr
		payload bool
		pos     Mask // MaskStart/MaskMiddle/MaskEnd bits
		dir     Mask // MaskReq or MaskAck
	}{
		{0x00, "RC_SEND_FIRST", nil, true, MaskStart, MaskReq},
		{0x01, "RC_SEND_MIDDLE", nil, true, MaskMiddle, MaskReq},
		{0x02, "RC_SEND_LAST", nil, true, MaskEnd, MaskReq},
		{0x03, "RC_SEND_LAST_WITH_IMMEDIATE", []Hdr{HdrImmDt}, true, MaskEnd, MaskReq},
		{0x04, "RC_SEND_ONLY", nil, true, MaskStart | MaskEnd, MaskReq},
		{0x05, "RC_SEND_ONLY_WITH_IMMEDIATE", []Hdr{HdrImmDt}, true, MaskStart | MaskEnd, MaskReq},
		{0x06, "RC_RDMA_WRITE_FIRST", []Hdr{HdrRETH}, true, MaskStart, MaskReq},
		{0x07, "RC_RDMA_WRITE_MIDDLE", nil, true, MaskMiddle, MaskReq},
		{0x08, "RC_RDMA_WRITE_LAST", nil, true, MaskEnd, MaskReq},
		{0x09, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", []Hdr{HdrImmDt}, true, MaskEnd, MaskReq},
		{0x0A, "RC_RDMA_WRITE_ONLY", []Hdr{HdrRETH}, true, MaskStart | MaskEnd, MaskReq},
		{0x0B, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", []Hdr{HdrRETH, HdrImmDt}, true, MaskStart | MaskEnd, MaskReq},
		{0x0C, "RC_RDMA_READ_REQUEST", []Hdr{HdrRETH}, false, MaskStart | MaskEnd, MaskReq},
		{0x0D, "RC_RDMA_READ_RESPONSE_FIRST", []Hdr{HdrAETH}, true, MaskStart, MaskAck},
		{0x0E, "RC_RDMA_READ_RESPONSE_MIDDLE", nil, true, MaskMiddle, MaskAck},
		{0x0F, "RC_RDMA_READ_RESPONSE_LAST", []Hdr{HdrAETH}, true, MaskEnd, MaskAck},
		{0x10, "RC_RDMA_READ_RESPONSE_ONLY", []Hdr{HdrAETH}, true, MaskStart | MaskEnd, MaskAck},
		{0x11, "RC_ACKNOWLEDGE", []Hdr{HdrAETH}, false, MaskStart | MaskEnd, MaskAck},
		{0x12, "RC_ATOMIC_ACKNOWLEDGE", []Hdr{HdrAETH, HdrAtomicAckETH}, false, MaskStart | MaskEnd, MaskAck},
		{0x13, "RC_COMPARE_SWAP", []Hdr{HdrAtomicETH}, false, MaskStart | MaskEnd, MaskReq},
		{0x14, "RC_FETCH_ADD", []Hdr{HdrAtomicETH}, false, MaskStart | MaskEnd, MaskReq},
		{0x16, "RC_SEND_LAST_WITH_INVALIDATE", []Hdr{HdrIETH}, true, MaskEnd, MaskReq},
		{0x17, "RC_SEND_ONLY_WITH_INVALIDATE", []Hdr{HdrIETH}, true, MaskStart | MaskEnd, MaskReq},
		{0x1C, "RC_FLUSH", []Hdr{HdrFETH, HdrRETH}, false, MaskStart | MaskEnd, MaskReq},
		{0x1D, "RC_ATOMIC_WRITE", []Hdr{HdrRETH}, true, MaskStart | MaskEnd, MaskReq},
	}
	seen := map[Opcode]bool{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seen[tc.op] = true
			info := tc.op.Info()
			require.Equal(t, tc.name, info.Name)
			require.Equal(t, tc.name, tc.op.String())
			require.True(t, tc.op.Valid())
			require.Equal(t, TransportRC, tc.op.Transport())
			off := BTHSize
			var want Mask
			for _, h := range tc.hdrs {
				require.True(t, info.Has(h), "header %d", h)
				require.Equal(t, off, int(info.Offset[h]))
				off += h.Size()
				want |= h.Mask()
			}
			hdrBits := Mask(1<<NumHdrs - 1)
			require.Equal(t, want, info.Mask&hdrBits, "exactly these headers")
			require.Equal(t, off, info.Length)
			require.Equal(t, tc.payload, info.Is(MaskPayload))
			require.Equal(t, tc.pos, info.Mask&(MaskStart|MaskMiddle|MaskEnd))
			require.Equal(t, tc.dir, info.Mask&(MaskReq|MaskAck))
		})
	}
	for op := Opcode(0); op < 0x20; op++ {
		require.Equal(t, seen[op], op.Valid(), "RC opcode 0x%02x", uint8(op))
	}
}

func TestOpcodeTableOthers(t *testing.T) {
	tests := []struct {
		op     Opcode
		name   string
		length int
	}{
		{0x20, "UC_SEND_FIRST", 12},
		{0x23, "UC_SEND_LAST_WITH_IMMEDIATE", 16},
		{0x26, "UC_RDMA_WRITE_FIRST", 28},
		{0x2B, "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", 32},
		{0x40, "RD_SEND_FIRST", 24},
		{0x4C, "RD_RDMA_READ_REQUEST", 40},
		{0x4D, "RD_RDMA_READ_RESPONSE_FIRST", 20},
		{0x4E, "RD_RDMA_READ_RESPONSE_MIDDLE", 16},
		{0x52, "RD_ATOMIC_ACKNOWLEDGE", 28},
		{0x53, "RD_COMPARE_SWAP", 52},
		{0x55, "RD_RESYNC", 24},
		{0x64, "UD_SEND_ONLY", 20},
		{0x65, "UD_SEND_ONLY_WITH_IMMEDIATE", 24},
		{0x81, "CNP", 28},
	}
	for _, tc := range tests {
		require.Equal(t, tc.name, tc.op.String())
		require.Equal(t, tc.length, tc.op.Info().Length, tc.name)
	}
	// RD RESYNC: BTH, RDETH, DETH, no payload (IBA 9.2.1 table 38, 9.3).
	resync := Opcode(0x55).Info()
	require.Equal(t, Mask(MaskRDETH|MaskDETH), resync.Mask&Mask(1<<NumHdrs-1))
	require.Equal(t, BTHSize+RDETHSize, int(resync.Offset[HdrDETH]))
	require.True(t, resync.Is(MaskReq|MaskStart|MaskEnd))
	require.False(t, resync.Is(MaskPayload))
	valid := 0
	for op := 0; op < 256; op++ {
		if Opcode(op).Valid() {
			valid++
		}
	}
	// 25 RC + 12 UC + 23 RD (RESYNC included) + 2 UD + CNP.
	require.Equal(t, 25+12+23+2+1, valid)
	for _, op := range []Opcode{0x15, 0x18, 0x1E, 0x2C, 0x35, 0x3F, 0x56, 0x5D, 0x60, 0x66, 0x80, 0xA0, 0xFF} {
		require.False(t, op.Valid(), "0x%02x", uint8(op))
	}
	require.Equal(t, "OPCODE_0x15", Opcode(0x15).String())
}

// TestOpcodeOperationBits checks, for every RC opcode, the bits that say
// what the packet does at the responder: the operation (SEND, WRITE, READ,
// atomic, FLUSH, ATOMIC_WRITE, which also counts as a WRITE), whether it
// consumes a receive WQE (the first packet of a SEND, the last of a WRITE
// with immediate) and whether it completes a message there (the last
// packet of a SEND or of a WRITE with immediate), as rxe_opcode.c marks
// them with RXE_RWR_MASK and RXE_COMP_MASK. UC carries the same bits for
// the operations it shares with RC, and so does RD (IBA 9.2.1 table 38).
func TestOpcodeOperationBits(t *testing.T) {
	const (
		send  = MaskSend
		write = MaskWrite
		rwr   = MaskRWR
		comp  = MaskComp
	)
	tests := []struct {
		op   Opcode
		bits Mask
	}{
		{RCSendFirst, send | rwr},
		{RCSendMiddle, send},
		{RCSendLast, send | comp},
		{RCSendLastWithImmediate, send | comp},
		{RCSendOnly, send | rwr | comp},
		{RCSendOnlyWithImmediate, send | rwr | comp},
		{RCRDMAWriteFirst, write},
		{RCRDMAWriteMiddle, write},
		{RCRDMAWriteLast, write},
		{RCRDMAWriteLastWithImm, write | rwr | comp},
		{RCRDMAWriteOnly, write},
		{RCRDMAWriteOnlyWithImm, write | rwr | comp},
		{RCRDMAReadRequest, MaskRead},
		{RCRDMAReadResponseFirst, 0},
		{RCRDMAReadResponseMiddle, 0},
		{RCRDMAReadResponseLast, 0},
		{RCRDMAReadResponseOnly, 0},
		{RCAcknowledge, 0},
		{RCAtomicAcknowledge, 0},
		{RCCompareSwap, MaskAtomic},
		{RCFetchAdd, MaskAtomic},
		{RCSendLastWithInvalidate, send | comp},
		{RCSendOnlyWithInvalidate, send | rwr | comp},
		{RCFlush, MaskFlush},
		{RCAtomicWrite, write | MaskAtomicWrite},
	}
	opBits := MaskRead | MaskWrite | MaskSend | MaskAtomic | MaskFlush | MaskAtomicWrite | MaskRWR | MaskComp
	for _, tc := range tests {
		t.Run(tc.op.String(), func(t *testing.T) {
			require.Equal(t, tc.bits, tc.op.Info().Mask&opBits)
			if tc.op <= RCRDMAWriteOnlyWithImm {
				require.Equal(t, tc.bits, (TransportUC|tc.op).Info().Mask&opBits, "UC")
			}
			if rd := TransportRD | tc.op; rd.Valid() {
				require.Equal(t, tc.bits, rd.Info().Mask&opBits, "RD")
			}
		})
	}
	for _, op := range []Opcode{UDSendOnly, UDSendOnlyWithImmediate} {
		require.Equal(t, send|rwr|comp, op.Info().Mask&opBits, op.String())
	}
	require.Zero(t, CNP.Info().Mask&(opBits|MaskPayload|MaskReq|MaskAck), "CNP")
}

// TestOpcodeTransport: the transport service is the top three bits of the
// opcode (IBA 9.2.1 table 38), for every service including the CNP's
// 100b (IBA A17.9.2) and XRC's 101b.
func TestOpcodeTransport(t *testing.T) {
	tests := []struct {
		op, want Opcode
	}{
		{RCSendFirst, TransportRC},
		{RCAtomicWrite, TransportRC},
		{UCSendFirst, TransportUC},
		{UCRDMAWriteOnlyWithImm, TransportUC},
		{RDSendFirst, TransportRD},
		{RDFlush, TransportRD},
		{UDSendOnly, TransportUD},
		{UDSendOnlyWithImmediate, TransportUD},
		{CNP, TransportCNP},
		{0x9F, TransportCNP},
		{0xA0, TransportXRC},
		{0xB6, TransportXRC},
		{0xC0, 0xC0},
		{0xFF, 0xE0},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, tc.op.Transport(), "0x%02x", uint8(tc.op))
	}
}
