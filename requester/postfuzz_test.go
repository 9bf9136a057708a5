package requester

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// The regions of FuzzPost: the sources of SENDs and WRITEs (never
// written), the destinations of READs and atomics, and the fake
// responder's memory.
const (
	lkeySrc = lkeyA
	lkeyDst = 0x3D
	baseDst = 0x7000_0000
	postMem = 8192
)

// postOps are the work request opcodes FuzzPost picks from: every one an
// RC send queue takes, and some it refuses.
var postOps = []verbs.WROpcode{verbs.WRSend, verbs.WRSendWithImm, verbs.WRSendWithInv, verbs.WRRDMAWrite,
	verbs.WRRDMAWriteWithImm, verbs.WRRDMARead, verbs.WRAtomicCmpAndSwp, verbs.WRAtomicFetchAndAdd,
	verbs.WRAtomicWrite, verbs.WRLocalInv, verbs.WRBindMW, verbs.WRTSO, verbs.WRFlush}

// postErrs are the errors Post may refuse a work request with.
var postErrs = []error{ErrQueueFull, ErrUnsupportedOpcode, ErrTooManySGE, ErrInlineTooLong, ErrInlineNotAllowed,
	ErrAtomicLength, ErrAtomicAlign, ErrMessageTooLong, ErrReadPSNSpan, ErrNoRdAtomic}

// postWR makes a work request of the 8 bytes of rec (FuzzPost's layout).
func postWR(id uint64, rec []byte) verbs.SendWR {
	op := postOps[int(rec[0])%len(postOps)]
	flags := rec[1]
	wr := verbs.SendWR{ID: id, Opcode: op, Imm: uint32(rec[7]) * 0x01010101,
		CompareAdd: uint64(rec[7]), Swap: uint64(rec[7]) << 8, InvalidateRKey: uint32(rec[7])}
	if flags&1 != 0 {
		wr.Flags |= verbs.SendSignaled
	}
	if flags&8 != 0 {
		wr.Flags |= verbs.SendFence
	}
	length := int(binary.BigEndian.Uint16(rec[2:])) % 2048
	off := int(binary.BigEndian.Uint16(rec[4:])) % (postMem + 64) // past the region now and then
	key, base := uint32(lkeySrc), uint64(baseA)
	if op == verbs.WRRDMARead || op == verbs.WRAtomicCmpAndSwp || op == verbs.WRAtomicFetchAndAdd {
		key, base = lkeyDst, baseDst
	}
	if flags&0x40 != 0 {
		key = 0x99 // no such L_Key
	}
	if flags&2 != 0 {
		wr.Flags |= verbs.SendInline
		wr.InlineData = make([]byte, length%80)
		for i := range wr.InlineData {
			wr.InlineData[i] = byte(i) ^ rec[7]
		}
	} else {
		// Zero to five SGEs of length bytes each, one after the other.
		for i := range int(flags>>4) & 3 {
			wr.SGList = append(wr.SGList, verbs.SGE{Addr: base + uint64(off+i*length), Length: uint32(length), LKey: key})
		}
		if flags&0x80 != 0 {
			wr.SGList = append(wr.SGList, verbs.SGE{Addr: base + uint64(off), Length: uint32(length) % 9, LKey: key},
				verbs.SGE{Addr: base, Length: 0, LKey: key})
		}
	}
	// The remote range always lies in the responder's region; bit 2 of
	// flags misaligns it.
	n := wr.Length()
	roff := uint64(rec[6]) * 32 % (postMem - min(n, postMem) + 1) &^ 7
	if flags&4 != 0 && roff+n < postMem {
		roff++
	}
	wr.RemoteAddr, wr.RKey = rbase+roff, rkey
	return wr
}

// gather returns the bytes a work request sends (inline data or its SGEs
// in src), ok false when an SGE lies outside src.
func gather(wr *verbs.SendWR, mem fakeMem) ([]byte, bool) {
	if wr.Flags&verbs.SendInline != 0 {
		return bytes.Clone(wr.InlineData), true
	}
	var out []byte
	for _, s := range wr.SGList {
		b, ok := mem.Local(s.LKey, s.Addr, s.Length, 0)
		if !ok && s.Length > 0 {
			return nil, false
		}
		out = append(out, b...)
	}
	return out, true
}

// scatter writes data to a work request's SGEs in mem.
func scatter(wr *verbs.SendWR, mem fakeMem, data []byte) {
	for _, s := range wr.SGList {
		b, _ := mem.Local(s.LKey, s.Addr, s.Length, 0)
		data = data[copy(b, data):]
	}
}

// FuzzPost posts work requests made of the fuzzer's bytes (any opcode,
// inline or not, zero to five SGEs, L_Keys and ranges good and bad,
// misaligned remote addresses) to a requester talking to the fake
// responder, in batches that the link runs to the end. Post either
// refuses a work request with one of its errors, leaving the send queue
// as it was, or queues it. Then, against a model that runs the accepted
// work requests one after the other: every signaled one and every failed
// one completes exactly once, in posting order, with its opcode and
// length, and after the first failure the rest are flushed; and up to the
// first failure the SEND messages the responder received, its memory and
// the READ and atomic destinations are what the work requests made them
// (a SEND carries its bytes, a WRITE puts them at its remote address, a
// READ brings them back, an atomic returns the old value), the sources
// unchanged.
//
// Input: byte 0 selects the path MTU (256 << (b&3)); then records of 8
// bytes: opcode, flags (bit 0 signaled, 1 inline, 2 misaligned remote
// address, 3 fence, 4-5 SGEs, 6 a bad L_Key, 7 two short SGEs more),
// length, local offset, remote offset / 32, a value (immediate, compare,
// swap); a record whose opcode byte has bit 7 set ends a batch.
func FuzzPost(f *testing.F) {
	rec := func(op verbs.WROpcode, flags byte, length, off uint16, roff, v byte) []byte {
		i := 0
		for postOps[i] != op {
			i++
		}
		return []byte{byte(i), flags, byte(length >> 8), byte(length), byte(off >> 8), byte(off), roff, v}
	}
	end := func(r []byte) []byte { r[0] |= 0x80; return r }
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	f.Add(cat([]byte{0}, rec(verbs.WRSend, 0x11, 600, 10, 0, 1), rec(verbs.WRRDMAWrite, 0x21, 300, 100, 3, 2),
		end(rec(verbs.WRRDMARead, 0x11, 700, 0, 0, 3)), rec(verbs.WRAtomicFetchAndAdd, 0x11, 8, 16, 4, 5),
		rec(verbs.WRAtomicCmpAndSwp, 0x11, 8, 32, 4, 0), end(rec(verbs.WRAtomicWrite, 0x03, 8, 0, 7, 9))))
	f.Add(cat([]byte{1}, rec(verbs.WRSendWithImm, 0x03, 40, 0, 0, 7), rec(verbs.WRRDMAWriteWithImm, 0x31, 1500, 0, 9, 1),
		rec(verbs.WRRDMARead, 0x51, 100, 0, 0, 0), rec(verbs.WRSend, 0x11, 10, 0, 0, 0)))
	f.Add(cat([]byte{2}, rec(verbs.WRAtomicFetchAndAdd, 0x15, 8, 0, 1, 1), rec(verbs.WRRDMARead, 0x11, 0, 0, 0, 0),
		rec(verbs.WRSend, 0x01, 0, 0, 0, 0), rec(verbs.WRSendWithInv, 0x91, 3, 8190, 0, 4), rec(verbs.WRTSO, 1, 0, 0, 0, 0)))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		cfg := baseConfig(256<<(in[0]&3), packet.PSNMask-3)
		cfg.MaxRdAtomic = 2
		cfg.MaxWR = 6
		in = in[1:]
		h, fr, remote := withResponder(t, cfg, postMem, verbs.AccessRemote, 0x5C)
		src := h.mem[lkeySrc]
		dst := h.mem.add(lkeyDst, baseDst, postMem, verbs.AccessLocalWrite, 0x33)
		origSrc := bytes.Clone(src.buf)
		// The model: what the responder's memory, the READ and atomic
		// destinations and the SEND messages are after the accepted work
		// requests ran one after the other.
		model := fakeMem{rkey: {base: rbase, buf: bytes.Clone(remote.buf)}, lkeyDst: {base: baseDst, buf: bytes.Clone(dst.buf)},
			lkeySrc: src}
		var msgs [][]byte
		var accepted []verbs.SendWR
		failed := false
		for id := uint64(1); len(in) >= 8 && !failed; id++ {
			r := in[:8]
			in = in[8:]
			wr := postWR(id, r)
			before := h.r.Outstanding()
			if err := h.r.Post(&wr); err != nil {
				require.Equal(t, before, h.r.Outstanding(), "a refused WR is not queued")
				known := false
				for _, e := range postErrs {
					known = known || errors.Is(err, e)
				}
				require.True(t, known, "Post: %v", err)
				if len(in) >= 8 && r[0]&0x80 == 0 {
					continue
				}
			} else {
				accepted = append(accepted, wr)
				h.posted++
				if r[0]&0x80 == 0 && len(in) >= 8 && h.r.Outstanding() < cfg.MaxWR {
					continue
				}
			}
			// Run the batch to its end, then check it.
			first := len(h.cq.wcs)
			pumpLink(h, fr)
			if _, bad := h.r.Failed(); bad {
				h.r.Flush() // the owner flushes a failed send queue
			}
			wcs := h.cq.wcs[first:]
			batch := accepted[len(accepted)-h.posted:]
			h.posted = 0
			require.Zero(t, h.r.Outstanding(), "the batch ran to its end")
			// A WR of the batch with a bad SGE fails the send queue: a WR
			// before it that is still outstanding then is flushed.
			badBatch := false
			for _, w := range batch {
				_, ok := gather(&w, model)
				badBatch = badBatch || !ok
			}
			k := 0
			for _, w := range batch {
				data, ok := gather(&w, model)
				var wc *verbs.WC
				if k < len(wcs) && wcs[k].ID == w.ID {
					wc = &wcs[k]
					k++
				}
				switch {
				case !ok:
					require.NotNil(t, wc, "WR %d with a bad SGE completes", w.ID)
				case w.Opcode == verbs.WRRDMARead:
					scatter(&w, model, bytes.Clone(model[rkey].buf[w.RemoteAddr-rbase:][:len(data)]))
				case w.Opcode == verbs.WRAtomicCmpAndSwp || w.Opcode == verbs.WRAtomicFetchAndAdd:
					at := model[rkey].buf[w.RemoteAddr-rbase:][:8]
					old := binary.NativeEndian.Uint64(at)
					switch {
					case w.Opcode == verbs.WRAtomicFetchAndAdd:
						binary.NativeEndian.PutUint64(at, old+w.CompareAdd)
					case old == w.CompareAdd:
						binary.NativeEndian.PutUint64(at, w.Swap)
					}
					scatter(&w, model, binary.NativeEndian.AppendUint64(nil, old))
				case w.Opcode == verbs.WRSend || w.Opcode == verbs.WRSendWithImm || w.Opcode == verbs.WRSendWithInv:
					msgs = append(msgs, data)
				default: // WRITE, WRITE with immediate, ATOMIC_WRITE
					copy(model[rkey].buf[w.RemoteAddr-rbase:], data)
				}
				if wc == nil {
					require.Zero(t, w.Flags&verbs.SendSignaled, "signaled WR %d has no completion: %v", w.ID, h.cq.ids())
					continue
				}
				if wc.Status != verbs.WCSuccess {
					flushed := wc.Status == verbs.WCWRFlushErr && badBatch
					require.False(t, ok && !failed && !flushed, "WR %d failed (%v) with its SGEs good", w.ID, wc.Status)
					failed = true
					continue
				}
				require.NotZero(t, w.Flags&verbs.SendSignaled, "unsignaled WR %d completed", w.ID)
				require.True(t, ok, "WR %d with a bad SGE succeeded", w.ID)
				if w.Opcode == verbs.WRRDMARead {
					require.Equal(t, uint32(len(data)), wc.ByteLen, "READ %d", w.ID)
				}
			}
			require.Equal(t, len(wcs), k, "completions of WRs of this batch, in order: %v", h.cq.ids())
			if failed {
				break
			}
			require.Len(t, fr.msgs, len(msgs), "SEND messages")
			for i := range msgs {
				require.True(t, bytes.Equal(msgs[i], fr.msgs[i]), "SEND message %d", i)
			}
			require.Equal(t, model[rkey].buf, remote.buf, "the responder's memory")
			require.Equal(t, model[lkeyDst].buf, dst.buf, "the READ and atomic destinations")
			require.Equal(t, origSrc, src.buf, "the sources")
		}
		_, bad := h.r.Failed()
		require.Equal(t, failed, bad, "the requester failed just when a WR did")
	})
}
