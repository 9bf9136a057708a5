package retry

import "time"

// rnrTable maps an RNR timer code to its minimum delay (IBTA 9.7.5.2.8,
// table 45). Code 0 is the longest wait, not the shortest. Kernel rxe's
// rnrnak_usec (rxe_comp.c) has the same values except code 25, which it
// spells 61410 µs; the IBTA value, and the name of that code
// (IB_RNR_TIMER_061_44), is 61.44 ms, which is what we use.
var rnrTable = [32]time.Duration{
	0:  655360 * time.Microsecond,
	1:  10 * time.Microsecond,
	2:  20 * time.Microsecond,
	3:  30 * time.Microsecond,
	4:  40 * time.Microsecond,
	5:  60 * time.Microsecond,
	6:  80 * time.Microsecond,
	7:  120 * time.Microsecond,
	8:  160 * time.Microsecond,
	9:  240 * time.Microsecond,
	10: 320 * time.Microsecond,
	11: 480 * time.Microsecond,
	12: 640 * time.Microsecond,
	13: 960 * time.Microsecond,
	14: 1280 * time.Microsecond,
	15: 1920 * time.Microsecond,
	16: 2560 * time.Microsecond,
	17: 3840 * time.Microsecond,
	18: 5120 * time.Microsecond,
	19: 7680 * time.Microsecond,
	20: 10240 * time.Microsecond,
	21: 15360 * time.Microsecond,
	22: 20480 * time.Microsecond,
	23: 30720 * time.Microsecond,
	24: 40960 * time.Microsecond,
	25: 61440 * time.Microsecond,
	26: 81920 * time.Microsecond,
	27: 122880 * time.Microsecond,
	28: 163840 * time.Microsecond,
	29: 245760 * time.Microsecond,
	30: 327680 * time.Microsecond,
	31: 491520 * time.Microsecond,
}

// RNRDelay returns the minimum time a requester must wait after an RNR NAK
// carrying timer code code before it retries (IBTA 9.7.5.2.8, table 45;
// rxe_comp.c, rnrnak_usec). The same encoding is used for the QP attribute
// min_rnr_timer, which a responder puts into the RNR NAKs it sends.
//
// Only the low 5 bits of code are used, so the whole AETH syndrome of an RNR
// NAK (0x20 | code) may be passed as is. Code 0 means 655.36 ms, the longest
// wait; codes 1 to 31 grow from 0.01 ms to 491.52 ms.
func RNRDelay(code uint8) time.Duration {
	return rnrTable[code&0x1F]
}

// RNRCode returns the RNR timer code whose delay is the shortest one that is
// at least d: the encoding a responder should advertise to ask for a wait of
// at least d (IBTA 9.7.5.2.8, table 45). Ordered by delay the codes run
// 1, 2, …, 31, 0, so d ≤ 10 µs (including d ≤ 0) gives code 1, d just above
// 491.52 ms gives code 0, and anything longer than 655.36 ms saturates at
// code 0, the longest wait there is.
func RNRCode(d time.Duration) uint8 {
	// Codes 1..31 are sorted by delay; code 0 sits above all of them.
	lo, hi := 1, 32
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if rnrTable[mid] < d {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == 32 {
		return 0
	}
	return uint8(lo)
}
