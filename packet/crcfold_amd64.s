//go:build !purego

#include "textflag.h"

// Folding constants for the bit-reflected CRC-32/IEEE polynomial: a 128-bit
// lane X moved D bits towards the end of the message is
// clmul(X.lo, reflect(x^(D+32) mod P) << 1) xor clmul(X.hi, reflect(x^(D-32) mod P) << 1)
// (Gopal et al., "Fast CRC Computation for Generic Polynomials Using
// PCLMULQDQ", Intel, 2009). Each table repeats one (lo, hi) pair in the four
// lanes of a ZMM register; crcfold_test.go recomputes every constant.

// D = 2048: one 256-byte step of the four accumulators.
DATA fold2048<>+0(SB)/8, $0x11542778a
DATA fold2048<>+8(SB)/8, $0x1322d1430
DATA fold2048<>+16(SB)/8, $0x11542778a
DATA fold2048<>+24(SB)/8, $0x1322d1430
DATA fold2048<>+32(SB)/8, $0x11542778a
DATA fold2048<>+40(SB)/8, $0x1322d1430
DATA fold2048<>+48(SB)/8, $0x11542778a
DATA fold2048<>+56(SB)/8, $0x1322d1430
GLOBL fold2048<>(SB), RODATA, $64

// D = 1536, 1024, 512: the first three accumulators onto the fourth.
DATA fold1536<>+0(SB)/8, $0x1821d8bc0
DATA fold1536<>+8(SB)/8, $0x12e958ac4
DATA fold1536<>+16(SB)/8, $0x1821d8bc0
DATA fold1536<>+24(SB)/8, $0x12e958ac4
DATA fold1536<>+32(SB)/8, $0x1821d8bc0
DATA fold1536<>+40(SB)/8, $0x12e958ac4
DATA fold1536<>+48(SB)/8, $0x1821d8bc0
DATA fold1536<>+56(SB)/8, $0x12e958ac4
GLOBL fold1536<>(SB), RODATA, $64

DATA fold1024<>+0(SB)/8, $0x1e88ef372
DATA fold1024<>+8(SB)/8, $0x14a7fe880
DATA fold1024<>+16(SB)/8, $0x1e88ef372
DATA fold1024<>+24(SB)/8, $0x14a7fe880
DATA fold1024<>+32(SB)/8, $0x1e88ef372
DATA fold1024<>+40(SB)/8, $0x14a7fe880
DATA fold1024<>+48(SB)/8, $0x1e88ef372
DATA fold1024<>+56(SB)/8, $0x14a7fe880
GLOBL fold1024<>(SB), RODATA, $64

DATA fold512<>+0(SB)/8, $0x154442bd4
DATA fold512<>+8(SB)/8, $0x1c6e41596
DATA fold512<>+16(SB)/8, $0x154442bd4
DATA fold512<>+24(SB)/8, $0x1c6e41596
DATA fold512<>+32(SB)/8, $0x154442bd4
DATA fold512<>+40(SB)/8, $0x1c6e41596
DATA fold512<>+48(SB)/8, $0x154442bd4
DATA fold512<>+56(SB)/8, $0x1c6e41596
GLOBL fold512<>(SB), RODATA, $64

// D = 384, 256, 128: the lanes of the last 64 bytes onto its fourth lane.
DATA fold384<>+0(SB)/8, $0x03db1ecdc
DATA fold384<>+8(SB)/8, $0x174359406
GLOBL fold384<>(SB), RODATA, $16
DATA fold256<>+0(SB)/8, $0x0f1da05aa
DATA fold256<>+8(SB)/8, $0x15a546366
GLOBL fold256<>(SB), RODATA, $16
DATA fold128<>+0(SB)/8, $0x1751997d0
DATA fold128<>+8(SB)/8, $0x0ccaa009e
GLOBL fold128<>(SB), RODATA, $16

// The last 16 bytes X (as an XMM register: the first eight bytes in the
// low quadword) to the CRC register, with M(x) = X's polynomial and every
// constant reflected as above:
//   W = X.lo * (x^96 mod P) xor X.hi           (96 bits: M(x)*x^32, reduced)
//   V = (W mod 2^32) * (x^64 mod P) xor W>>32   (64 bits)
//   T = ((V mod 2^32) * mu mod 2^32) * P        (Barrett, mu = x^64 div P)
//   register = (V xor T) >> 32
// crcfold_test.go derives these constants too.
DATA reduce<>+0(SB)/8, $0x0ccaa009e  // x^96 mod P
DATA reduce<>+8(SB)/8, $0x163cd6124  // x^64 mod P
GLOBL reduce<>(SB), RODATA, $16
DATA barrett<>+0(SB)/8, $0x1f7011641 // mu
DATA barrett<>+8(SB)/8, $0x1db710641 // P
GLOBL barrett<>(SB), RODATA, $16
DATA low32<>+0(SB)/8, $0xffffffff
DATA low32<>+8(SB)/8, $0
GLOBL low32<>(SB), RODATA, $16

// func foldAVX512(reg uint32, dst, p []byte) uint32
//
// reg is the CRC register before p (the running CRC's complement); len(p)
// is a non-zero multiple of 256. It returns the register after p. Four ZMM
// accumulators fold 256 bytes a step, so four carry-less multiply chains
// run at once; the 16 bytes left are reduced to the register by two more
// folds and a Barrett reduction. When dst is not empty (it is then at
// least as long as p) each 64-byte block is also stored to dst as it is
// loaded: p is copied in the same pass that folds it, and the 4 KiB after
// each block are prefetched.
TEXT ·foldAVX512(SB), NOSPLIT, $0-60
	MOVL reg+0(FP), AX
	MOVQ dst_base+8(FP), DI
	MOVQ dst_len+16(FP), DX
	MOVQ p_base+32(FP), SI
	MOVQ p_len+40(FP), CX

	VMOVDQU64 (SI), Z1
	VMOVDQU64 64(SI), Z2
	VMOVDQU64 128(SI), Z3
	VMOVDQU64 192(SI), Z4
	TESTQ     DX, DX
	JZ        first
	VMOVDQU64 Z1, (DI)
	VMOVDQU64 Z2, 64(DI)
	VMOVDQU64 Z3, 128(DI)
	VMOVDQU64 Z4, 192(DI)
	ADDQ      $256, DI

first:
	VMOVD     AX, X10       // zeroes the rest of Z10
	VPXORQ    Z10, Z1, Z1   // the register meets the first four bytes
	ADDQ      $256, SI
	SUBQ      $256, CX
	JZ        reduce

	VMOVDQU64 fold2048<>(SB), Z0

loop:
	VMOVDQU64  (SI), Z11
	VMOVDQU64  64(SI), Z12
	VMOVDQU64  128(SI), Z13
	VMOVDQU64  192(SI), Z14
	TESTQ      DX, DX
	JZ         fold
	// A payload is at most one 4 KiB MTU; the next packet of a message
	// copies the next 4 KiB of its memory region. The hardware's stream
	// prefetch does not cross into that page, so it is asked for here,
	// a line per 64 bytes copied (a hint: an address past the region
	// does not fault).
	PREFETCHT0 4096(SI)
	PREFETCHT0 4160(SI)
	PREFETCHT0 4224(SI)
	PREFETCHT0 4288(SI)
	VMOVDQU64  Z11, (DI)
	VMOVDQU64  Z12, 64(DI)
	VMOVDQU64  Z13, 128(DI)
	VMOVDQU64  Z14, 192(DI)
	ADDQ       $256, DI

fold:
	VPCLMULQDQ $0x11, Z0, Z1, Z5
	VPCLMULQDQ $0x00, Z0, Z1, Z1
	VPCLMULQDQ $0x11, Z0, Z2, Z6
	VPCLMULQDQ $0x00, Z0, Z2, Z2
	VPCLMULQDQ $0x11, Z0, Z3, Z7
	VPCLMULQDQ $0x00, Z0, Z3, Z3
	VPCLMULQDQ $0x11, Z0, Z4, Z8
	VPCLMULQDQ $0x00, Z0, Z4, Z4
	VPTERNLOGD $0x96, Z11, Z5, Z1
	VPTERNLOGD $0x96, Z12, Z6, Z2
	VPTERNLOGD $0x96, Z13, Z7, Z3
	VPTERNLOGD $0x96, Z14, Z8, Z4
	ADDQ       $256, SI
	SUBQ       $256, CX
	JNZ        loop

reduce:
	// Z4 ^= Z1 moved 1536 bits, Z2 moved 1024, Z3 moved 512.
	VMOVDQU64  fold1536<>(SB), Z0
	VPCLMULQDQ $0x11, Z0, Z1, Z5
	VPCLMULQDQ $0x00, Z0, Z1, Z1
	VPTERNLOGD $0x96, Z5, Z1, Z4
	VMOVDQU64  fold1024<>(SB), Z0
	VPCLMULQDQ $0x11, Z0, Z2, Z6
	VPCLMULQDQ $0x00, Z0, Z2, Z2
	VPTERNLOGD $0x96, Z6, Z2, Z4
	VMOVDQU64  fold512<>(SB), Z0
	VPCLMULQDQ $0x11, Z0, Z3, Z7
	VPCLMULQDQ $0x00, Z0, Z3, Z3
	VPTERNLOGD $0x96, Z7, Z3, Z4

	// The four lanes of Z4 onto its last: lane 0 moved 384 bits, lane 1
	// 256, lane 2 128.
	VEXTRACTI32X4 $3, Z4, X9
	VEXTRACTI32X4 $0, Z4, X1
	VEXTRACTI32X4 $1, Z4, X2
	VEXTRACTI32X4 $2, Z4, X3
	VMOVDQU       fold384<>(SB), X0
	VPCLMULQDQ    $0x11, X0, X1, X5
	VPCLMULQDQ    $0x00, X0, X1, X1
	VPXOR         X5, X1, X1
	VPXOR         X1, X9, X9
	VMOVDQU       fold256<>(SB), X0
	VPCLMULQDQ    $0x11, X0, X2, X6
	VPCLMULQDQ    $0x00, X0, X2, X2
	VPXOR         X6, X2, X2
	VPXOR         X2, X9, X9
	VMOVDQU       fold128<>(SB), X0
	VPCLMULQDQ    $0x11, X0, X3, X7
	VPCLMULQDQ    $0x00, X0, X3, X3
	VPXOR         X7, X3, X3
	VPXOR         X3, X9, X9

	// X9 to the register (the reduction above).
	VMOVDQU    reduce<>(SB), X0
	VPSRLDQ    $8, X9, X1
	VPCLMULQDQ $0x00, X0, X9, X2 // X.lo * (x^96 mod P)
	VPXOR      X1, X2, X2        // W
	VPSRLDQ    $4, X2, X3        // W >> 32
	VPAND      low32<>(SB), X2, X2
	VPCLMULQDQ $0x10, X0, X2, X2 // (W mod 2^32) * (x^64 mod P)
	VPXOR      X3, X2, X2        // V
	VMOVDQU    barrett<>(SB), X0
	VPAND      low32<>(SB), X2, X4
	VPCLMULQDQ $0x00, X0, X4, X4 // (V mod 2^32) * mu
	VPAND      low32<>(SB), X4, X4
	VPCLMULQDQ $0x10, X0, X4, X4 // * P
	VPXOR      X4, X2, X2
	VPEXTRD    $1, X2, AX        // (V xor T) >> 32
	MOVL       AX, ret+56(FP)
	VZEROUPPER
	RET

// func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL sub+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func xgetbv0() (eax, edx uint32)
TEXT ·xgetbv0(SB), NOSPLIT, $0-8
	MOVL $0, CX
	XGETBV
	MOVL AX, eax+0(FP)
	MOVL DX, edx+4(FP)
	RET
