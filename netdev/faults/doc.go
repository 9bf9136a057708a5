// Package faults injects faults into the datagrams of a netdev.Conn: a
// decorator that drops, duplicates, reorders, delays or corrupts datagrams,
// and makes sends fail as a full qdisc does, by probability or by script,
// per direction and per BTH opcode. It is seeded and deterministic: with
// the same Config (seed included) and the same sequence of datagrams in
// each direction, it makes the same decisions, whatever the timing and
// however the datagrams are batched.
//
// Wrap a Conn and use the result in its place:
//
//	conn = faults.Wrap(conn, faults.Config{Seed: 1, Rules: []faults.Rule{
//		{Action: faults.Drop, Prob: 0.01},
//		{Action: faults.Drop, Dir: faults.Send, Opcodes: []packet.Opcode{packet.RCRDMAReadResponseMiddle}, Nth: 3},
//	}})
//
// ParseRule reads the same rules from text (the grammar is in its doc), and
// RuleFlag turns it into a repeatable command-line flag.
//
// # Decisions
//
// Each rule of each direction draws from its own PCG generator
// (math/rand/v2), seeded from Config.Seed, Config.Stream, the direction
// and the rule's index, and only for datagrams it applies to; a scripted
// rule counts the datagrams it applies to. So a rule's decisions depend only on the seed
// and on the datagrams of its direction, not on time, batching or the
// other rules. Sends are decided in WriteBatch, in order; receives in the
// order the inner Conn delivers them.
//
// If the inner Conn refuses a datagram (a local drop, or Close), WriteBatch
// returns as netdev.Conn requires and the decisions about the datagrams it
// did not send are taken back, with the counts they made toward releasing
// held (reorder) datagrams, so sending them again meets the same
// decisions. A held (reorder), delayed or duplicate copy that the inner
// Conn refuses is lost, as a network would lose it, and counted in
// DirStats.Lost (a held one released by a later datagram is requeued
// instead: to be released by the same datagram again if that one was
// refused too, else to go out before the next datagram WriteBatch sends).
//
// # Time
//
// Nothing sleeps in the caller's goroutine. A delayed or held datagram
// being sent is sent by a timer (time.AfterFunc) when its time comes. On
// the receive side, when receive rules that duplicate, reorder or delay
// exist, an internal goroutine reads the inner Conn and queues what it
// reads; ReadBatch returns queued datagrams, and waits with a timer for a
// delayed one to fall due. Rules that only drop or corrupt are applied by
// ReadBatch itself, in the caller's buffers. Only
// timers, channels and mutexes are used, so a Conn over a netdev pipe
// works inside a testing/synctest bubble (Wrap it inside the bubble and
// Close it before the bubble ends).
//
// A direction without rules passes through untouched, without copies or
// allocations.
package faults
