package oob

import (
	"encoding/binary"
	"fmt"
)

// CMKeyMsgSize is the size of the key message perftest sends over an
// rdma_cm connection (-R): struct pingpong_dest itself, 56 bytes on a
// 64-bit host (perftest 6.x before the tail-marker field was added).
const CMKeyMsgSize = 56

// CMKeyMsgSizeTail is the size of the key message of perftest 6.29 and
// later over an rdma_cm connection: struct pingpong_dest grew a 64-bit
// tail_markers_vaddr after vaddr (for --data_validation), 64 bytes on a
// 64-bit host. rdma_write_keys sends it, and rdma_read_keys reads it,
// whatever the peer's version.
const CMKeyMsgSizeTail = 64

// CMTailMinVersion is the first perftest version whose rdma_cm key
// message is CMKeyMsgSizeTail bytes.
const CMTailMinVersion = 6.29

// MarshalCM formats k as perftest's rdma_write_keys sends it: the fields of
// struct pingpong_dest in network byte order (lid, out_reads, qpn, psn,
// rkey as 32-bit integers; 4 bytes of alignment; vaddr as 64 bits; the GID;
// srqn and gid_index as 32 bits). gidIndex is this end's GID index.
func (k KeyMsg) MarshalCM(gidIndex int) []byte { return k.marshalCM(gidIndex, false) }

// MarshalCMTail is MarshalCM in perftest 6.29's layout: a zero
// tail_markers_vaddr (no tail markers) follows vaddr, then the GID, srqn
// and gid_index.
func (k KeyMsg) MarshalCMTail(gidIndex int) []byte { return k.marshalCM(gidIndex, true) }

func (k KeyMsg) marshalCM(gidIndex int, tail bool) []byte {
	size, gid := CMKeyMsgSize, 32
	if tail {
		size, gid = CMKeyMsgSizeTail, 40
	}
	b := make([]byte, size)
	be := binary.BigEndian
	be.PutUint32(b[0:], uint32(k.LID))
	be.PutUint32(b[4:], uint32(k.OutReads))
	be.PutUint32(b[8:], k.QPN)
	be.PutUint32(b[12:], k.PSN)
	be.PutUint32(b[16:], k.RKey)
	be.PutUint64(b[24:], k.VAddr)
	copy(b[gid:gid+16], k.GID[:])
	be.PutUint32(b[gid+16:], k.SRQN)
	be.PutUint32(b[gid+20:], uint32(int32(gidIndex)))
	return b
}

// ParseCMKeyMsg reads a key message in rdma_read_keys' layout (see
// MarshalCM); the alignment bytes and the GID index are ignored.
func ParseCMKeyMsg(b []byte) (KeyMsg, error) { return parseCMKeyMsg(b, false) }

// ParseCMKeyMsgTail reads a key message in perftest 6.29's layout (see
// MarshalCMTail); the tail-marker address is ignored as well.
func ParseCMKeyMsgTail(b []byte) (KeyMsg, error) { return parseCMKeyMsg(b, true) }

func parseCMKeyMsg(b []byte, tail bool) (KeyMsg, error) {
	size, gid := CMKeyMsgSize, 32
	if tail {
		size, gid = CMKeyMsgSizeTail, 40
	}
	if len(b) != size {
		return KeyMsg{}, fmt.Errorf("rdma_cm key message of %d bytes, want %d", len(b), size)
	}
	be := binary.BigEndian
	lid, reads := be.Uint32(b[0:]), be.Uint32(b[4:])
	if lid > 0xFFFF || reads > 0xFFFF {
		return KeyMsg{}, fmt.Errorf("rdma_cm key message with LID %#x and out_reads %d: not perftest's layout", lid, reads)
	}
	k := KeyMsg{LID: uint16(lid), OutReads: uint16(reads), QPN: be.Uint32(b[8:]) & 0xFFFFFF, PSN: be.Uint32(b[12:]) & 0xFFFFFF,
		RKey: be.Uint32(b[16:]), VAddr: be.Uint64(b[24:]), SRQN: be.Uint32(b[gid+16:])}
	copy(k.GID[:], b[gid:gid+16])
	return k, nil
}
