package packet

import (
	"encoding/binary"
	"hash/crc32"
)

// The standard library's crc32.Update reaches its assembly through a
// function variable, so a stack buffer handed to it escapes to the heap.
// The ICRC's short parts are hashed here with a slicing-by-8 table walk
// instead (same CRC-32/IEEE, same pre- and post-inversion as crc32.Update):
// the masked pseudo-header, fed from registers a word at a time (crcWord,
// ICRCStart), the 16 bytes the vector fold leaves and the masked headers
// of a captured datagram (updateSmall, from stack buffers). Only packet
// bytes, on the heap already, go through crc32.Update.

var slicing8 [8][256]uint32

func init() {
	slicing8[0] = *crc32.IEEETable
	for i := 0; i < 256; i++ {
		c := slicing8[0][i]
		for t := 1; t < 8; t++ {
			c = slicing8[0][c&0xFF] ^ c>>8
			slicing8[t][i] = c
		}
	}
}

// updateSmall is crc32.Update(crc, crc32.IEEETable, p) for short,
// possibly stack-allocated p.
func updateSmall(crc uint32, p []byte) uint32 {
	crc = ^crc
	for len(p) >= 8 {
		crc ^= binary.LittleEndian.Uint32(p)
		hi := binary.LittleEndian.Uint32(p[4:])
		crc = slicing8[7][crc&0xFF] ^ slicing8[6][crc>>8&0xFF] ^ slicing8[5][crc>>16&0xFF] ^ slicing8[4][crc>>24] ^
			slicing8[3][hi&0xFF] ^ slicing8[2][hi>>8&0xFF] ^ slicing8[1][hi>>16&0xFF] ^ slicing8[0][hi>>24]
		p = p[8:]
	}
	for _, b := range p {
		crc = slicing8[0][byte(crc)^b] ^ crc>>8
	}
	return ^crc
}

// crcWord feeds the eight bytes of w, its low byte first, into the
// reflected CRC-32 register crc (not inverted: updateSmall's inner step).
func crcWord(crc uint32, w uint64) uint32 {
	lo, hi := crc^uint32(w), uint32(w>>32)
	return slicing8[7][lo&0xFF] ^ slicing8[6][lo>>8&0xFF] ^ slicing8[5][lo>>16&0xFF] ^ slicing8[4][lo>>24] ^
		slicing8[3][hi&0xFF] ^ slicing8[2][hi>>8&0xFF] ^ slicing8[1][hi>>16&0xFF] ^ slicing8[0][hi>>24]
}

// crcWord32 is crcWord for the four bytes of w.
func crcWord32(crc, w uint32) uint32 {
	c := crc ^ w
	return slicing8[3][c&0xFF] ^ slicing8[2][c>>8&0xFF] ^ slicing8[1][c>>16&0xFF] ^ slicing8[0][c>>24]
}
