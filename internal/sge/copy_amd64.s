//go:build !purego

#include "textflag.h"

// func copyAVX2(dst, src []byte)
//
// Copies len(src), a non-zero multiple of 128, bytes from src to dst
// (which is at least as long; they do not overlap), 128 bytes a step in
// unaligned 32-byte loads and stores, and asks for the line 4 KiB past
// each destination line it writes (PREFETCHT0: a hint, which does not
// fault on an address outside the region).
TEXT ·copyAVX2(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX

loop:
	PREFETCHT0 4096(DI)
	PREFETCHT0 4160(DI)
	VMOVDQU    (SI), Y0
	VMOVDQU    32(SI), Y1
	VMOVDQU    64(SI), Y2
	VMOVDQU    96(SI), Y3
	VMOVDQU    Y0, (DI)
	VMOVDQU    Y1, 32(DI)
	VMOVDQU    Y2, 64(DI)
	VMOVDQU    Y3, 96(DI)
	ADDQ       $128, SI
	ADDQ       $128, DI
	SUBQ       $128, CX
	JNZ        loop
	VZEROUPPER
	RET
