package packet

// Selective repeat's buffer contract (docs/recovery.md, "Selective
// repeat"): a responder keeps out-of-order requests in slots of PMTU +
// OOOSlotOverhead bytes, as many as its byte limit allows, and a requester
// sends no further past the last request it knows executed than that many
// packets (OOOPackets), so that what the responder must hold while a hole
// is repaired fits. Both are gorxe extensions, used only when both ends
// offered selective repeat.

// OOOSlotOverhead is the room an out-of-order slot keeps beyond the path
// MTU for a request's headers, pad and ICRC. The largest requests are BTH +
// AtomicETH + ICRC (44 bytes, no payload) and BTH + RETH + ImmDt + PMTU
// bytes of payload + 3 pad bytes + ICRC (PMTU + 39 bytes).
const OOOSlotOverhead = 64

// DefaultOOOLimit is the out-of-order buffer, in bytes, of a responder
// that was given no limit, and the one a requester assumes when it is not
// told its peer's: 512 slots of 4096 + OOOSlotOverhead bytes, four
// 128-PSN windows, so that a requester keeps a full window in flight
// beyond a hole for the round trips its repair takes.
const DefaultOOOLimit = 512 * (4096 + OOOSlotOverhead)

// OOOPackets returns how many requests an out-of-order buffer of limit
// bytes holds at path MTU pmtu (limit 0 or less: DefaultOOOLimit).
func OOOPackets(limit, pmtu int) int {
	if limit <= 0 {
		limit = DefaultOOOLimit
	}
	return limit / (max(pmtu, 0) + OOOSlotOverhead)
}
