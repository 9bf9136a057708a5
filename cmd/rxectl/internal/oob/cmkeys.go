package oob

import (
	"encoding/binary"
	"fmt"
)

// CMKeyMsgSize is the size of the key message perftest sends over an
// rdma_cm connection (-R): struct pingpong_dest itself, 56 bytes on a
// 64-bit host (perftest 6.x before the tail-marker field was added).
const CMKeyMsgSize = 56

// MarshalCM formats k as perftest's rdma_write_keys sends it: the fields of
// struct pingpong_dest in network byte order (lid, out_reads, qpn, psn,
// rkey as 32-bit integers; 4 bytes of alignment; vaddr as 64 bits; the GID;
// srqn and gid_index as 32 bits). gidIndex is this end's GID index.
func (k KeyMsg) MarshalCM(gidIndex int) []byte {
	b := make([]byte, CMKeyMsgSize)
	be := binary.BigEndian
	be.PutUint32(b[0:], uint32(k.LID))
	be.PutUint32(b[4:], uint32(k.OutReads))
	be.PutUint32(b[8:], k.QPN)
	be.PutUint32(b[12:], k.PSN)
	be.PutUint32(b[16:], k.RKey)
	be.PutUint64(b[24:], k.VAddr)
	copy(b[32:48], k.GID[:])
	be.PutUint32(b[48:], k.SRQN)
	be.PutUint32(b[52:], uint32(int32(gidIndex)))
	return b
}

// ParseCMKeyMsg reads a key message in rdma_read_keys' layout (see
// MarshalCM); the alignment bytes and the GID index are ignored.
func ParseCMKeyMsg(b []byte) (KeyMsg, error) {
	if len(b) != CMKeyMsgSize {
		return KeyMsg{}, fmt.Errorf("rdma_cm key message of %d bytes, want %d", len(b), CMKeyMsgSize)
	}
	be := binary.BigEndian
	lid, reads := be.Uint32(b[0:]), be.Uint32(b[4:])
	if lid > 0xFFFF || reads > 0xFFFF {
		return KeyMsg{}, fmt.Errorf("rdma_cm key message with LID %#x and out_reads %d: not perftest's layout", lid, reads)
	}
	k := KeyMsg{LID: uint16(lid), OutReads: uint16(reads), QPN: be.Uint32(b[8:]) & 0xFFFFFF, PSN: be.Uint32(b[12:]) & 0xFFFFFF,
		RKey: be.Uint32(b[16:]), VAddr: be.Uint64(b[24:]), SRQN: be.Uint32(b[48:])}
	copy(k.GID[:], b[32:48])
	return k, nil
}
