package faults

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
)

// Queue limits.
const (
	// DefaultMaxQueue is Config.MaxQueue's default.
	DefaultMaxQueue = 4096
	// DefaultMaxDatagram is Config.MaxDatagram's default: more than any
	// RoCEv2 datagram (4096 bytes of payload plus headers) and any UDP
	// payload of a 9000-byte jumbo frame.
	DefaultMaxDatagram = 9216
)

// Config configures Wrap.
type Config struct {
	// Seed seeds every rule's generator.
	Seed uint64

	// Stream tells apart Conns wrapped with the same Seed and Rules, such
	// as the sockets of one device (one per completion vector): each
	// Stream gives every rule a generator of its own, so that their
	// probabilistic decisions are independent instead of the same
	// datagram for datagram. Stream 0 draws what a Conn without it drew.
	// Scripted rules (Nth) count the datagrams of each Conn apart.
	Stream uint64

	// Rules are the faults, in priority order.
	Rules []Rule

	// Trace, if not nil, is called for every datagram a rule acts on, with
	// its direction, the action and the datagram's BTH opcode and PSN
	// (zero for a datagram too short for a BTH). It is called
	// synchronously with an internal lock held, from the goroutine that
	// calls WriteBatch (sends) or from the Conn's reader goroutine
	// (receives), so it must be quick and must not call the Conn. For
	// sends it is called once the datagram's fate is certain (after the
	// inner Conn took the datagrams before it).
	Trace func(dir Dir, action Action, opcode packet.Opcode, psn packet.PSN)

	// MaxQueue bounds, per direction, the datagrams held by Reorder and
	// Delay rules (and, on receive, those queued for ReadBatch): a
	// datagram that finds the queue full is lost (DirStats.Lost). Zero
	// means DefaultMaxQueue.
	MaxQueue int

	// MaxDatagram is the size of the buffers the receive side reads the
	// inner Conn into when receive rules exist; longer datagrams are
	// dropped by the inner Conn as truncated. Zero means
	// DefaultMaxDatagram.
	MaxDatagram int
}

// Validate reports whether every rule is valid.
func (cfg *Config) Validate() error {
	for i := range cfg.Rules {
		if err := cfg.Rules[i].Validate(); err != nil {
			return fmt.Errorf("rule %d: %w", i, err)
		}
	}
	if cfg.MaxQueue < 0 || cfg.MaxDatagram < 0 {
		return fmt.Errorf("%w: negative MaxQueue or MaxDatagram", ErrRule)
	}
	return nil
}

// DirStats counts what the rules did in one direction.
type DirStats struct {
	Dropped    uint64 // Drop
	Duplicated uint64 // Duplicate
	Reordered  uint64 // Reorder
	Delayed    uint64 // Delay
	Corrupted  uint64 // Corrupt
	LocalDrops uint64 // LocalDrop (send only)

	// Lost counts datagrams lost besides Drop decisions: held or delayed
	// datagrams that found the queue full, were refused by the inner Conn
	// or were discarded by Close; duplicate copies the inner Conn
	// refused; received datagrams longer than the caller's buffer.
	Lost uint64
}

// Stats is a snapshot of a Conn's counters.
type Stats struct {
	Send, Recv DirStats
}

// counter indexes: the actions, then lost.
const (
	lostIdx   = int(numActions)
	numCounts = lostIdx + 1
)

type dirCounters [numCounts]atomic.Uint64

func (c *dirCounters) snapshot() DirStats {
	return DirStats{
		Dropped:    c[Drop].Load(),
		Duplicated: c[Duplicate].Load(),
		Reordered:  c[Reorder].Load(),
		Delayed:    c[Delay].Load(),
		Corrupted:  c[Corrupt].Load(),
		LocalDrops: c[LocalDrop].Load(),
		Lost:       c[lostIdx].Load(),
	}
}

// Conn is a netdev.Conn that injects faults into the datagrams of another.
// It is safe for the same concurrent use as netdev.Conn.
type Conn struct {
	inner netdev.Conn
	trace func(Dir, Action, packet.Opcode, packet.PSN)
	send  *sendSide // nil: sends pass through
	recv  *recvSide // nil: receives pass through
	// shared is inner as a netdev.SharedReader when the Conn reads in
	// turn (SharesReads), else nil; inPlace says that inner splits GRO
	// buffers in place (decideFill). Both are fixed at Wrap.
	shared  netdev.SharedReader
	inPlace bool
	done    chan struct{}
	once    sync.Once
	stats   [2]dirCounters // Send, Recv
}

var (
	errClosed                = fmt.Errorf("faults: %w", net.ErrClosed)
	errLocalDrop error       = netdev.DropError{Errno: syscall.ENOBUFS}
	_            netdev.Conn = (*Conn)(nil)
	// errNotShared is returned by the netdev.SharedReader methods of a
	// Conn that does not read in turn (SharesReads).
	errNotShared = fmt.Errorf("faults: reading in turn needs an inner netdev.SharedReader and receive rules that only drop or corrupt: %w", errors.ErrUnsupported)
)

// Wrap returns a Conn that sends and receives through inner, applying
// cfg's rules. It panics if cfg.Validate fails (ParseRule returns only
// valid rules). When receive rules that hold, delay or duplicate
// datagrams exist it starts a goroutine that reads inner until inner is
// closed; rules that only drop or corrupt are applied by ReadBatch. The Conn owns inner: its Close closes inner.
func Wrap(inner netdev.Conn, cfg Config) *Conn {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	if cfg.MaxQueue == 0 {
		cfg.MaxQueue = DefaultMaxQueue
	}
	if cfg.MaxDatagram == 0 {
		cfg.MaxDatagram = DefaultMaxDatagram
	}
	c := &Conn{inner: inner, trace: cfg.Trace, done: make(chan struct{})}
	if e := compile(&cfg, Send); len(e.rules) > 0 {
		c.send = newSendSide(c, e, &cfg)
	}
	if e := compile(&cfg, Recv); len(e.rules) > 0 {
		c.recv = newRecvSide(c, e, &cfg)
		if !c.recv.direct {
			go c.recv.pump()
		}
	}
	if s, ok := netdev.AsSharedReader(inner); ok && (c.recv == nil || c.recv.direct) {
		c.shared = s
		g, ok := inner.(interface{ GRO() bool })
		c.inPlace = ok && g.GRO()
	}
	return c
}

// ReadBatch implements netdev.Conn.
func (c *Conn) ReadBatch(msgs []netdev.Message) (int, error) {
	if c.recv == nil {
		return c.inner.ReadBatch(msgs)
	}
	return c.recv.read(msgs)
}

// WriteBatch implements netdev.Conn. A datagram a Drop, Reorder or Delay
// rule takes counts as sent; a LocalDrop rule's datagram is refused with a
// netdev.DropError carrying syscall.ENOBUFS, the error a full qdisc gives,
// so errors.Is(err, netdev.ErrLocalDrop) and errors.Is(err,
// syscall.ENOBUFS) hold.
func (c *Conn) WriteBatch(msgs []netdev.Message) (int, error) {
	if c.send == nil {
		return c.inner.WriteBatch(msgs)
	}
	return c.send.write(msgs)
}

// BatchSize implements netdev.Conn: the inner Conn's.
func (c *Conn) BatchSize() int { return c.inner.BatchSize() }

// LocalAddr implements netdev.Conn: the inner Conn's.
func (c *Conn) LocalAddr() netip.AddrPort { return c.inner.LocalAddr() }

// Unwrap returns the inner Conn (for its own Stats, say).
func (c *Conn) Unwrap() netdev.Conn { return c.inner }

// ReportIPFields implements netdev.IPFieldReporter: it asks the inner Conn.
// Held, delayed and duplicated datagrams keep the fields they came with.
func (c *Conn) ReportIPFields() error {
	if r, ok := c.inner.(netdev.IPFieldReporter); ok {
		return r.ReportIPFields()
	}
	return errors.ErrUnsupported
}

// Stats returns a snapshot of the counters.
func (c *Conn) Stats() Stats {
	return Stats{Send: c.stats[0].snapshot(), Recv: c.stats[1].snapshot()}
}

// Close implements netdev.Conn. It closes the inner Conn, unblocks pending
// calls (which return an error wrapping net.ErrClosed) and discards held
// and delayed datagrams, counting them in DirStats.Lost. Closing twice is
// harmless.
func (c *Conn) Close() error {
	var err error
	c.once.Do(func() {
		close(c.done)
		err = c.inner.Close()
		if c.send != nil {
			c.send.close()
		}
		if c.recv != nil {
			c.recv.close()
		}
	})
	return err
}

func (c *Conn) isClosed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func dirIndex(d Dir) int {
	if d == Send {
		return 0
	}
	return 1
}

// act counts and traces an action.
func (c *Conn) act(d Dir, a Action, b []byte) {
	c.stats[dirIndex(d)][a].Add(1)
	if c.trace != nil {
		op, psn := bthOf(b)
		c.trace(d, a, op, psn)
	}
}

func (c *Conn) lost(d Dir, n int) {
	if n > 0 {
		c.stats[dirIndex(d)][lostIdx].Add(uint64(n))
	}
}

// bthOf returns the BTH opcode and PSN of a datagram, or zeros.
func bthOf(b []byte) (packet.Opcode, packet.PSN) {
	if len(b) < packet.BTHSize {
		return 0, 0
	}
	h := packet.BTH(b)
	return h.Opcode(), h.PSN()
}

// crule is a compiled rule with its generator and count.
type crule struct {
	Rule
	ops      [4]uint64 // opcode bitmap, when filtered
	filtered bool
	always   bool   // Prob == 1
	thresh   uint64 // fires when a draw is below it
	first    uint64 // scripted: fires on matches first..last
	last     uint64
	pcg      rand.PCG
	rng      *rand.Rand // over pcg
	seen     uint64     // datagrams matched so far
}

func (r *crule) matches(b []byte) bool {
	if !r.filtered {
		return true
	}
	if len(b) < packet.BTHSize {
		return false
	}
	op := b[0]
	return r.ops[op>>6]&(1<<(op&63)) != 0
}

// ruleState is what a decision changes in a crule.
type ruleState struct {
	pcg  rand.PCG
	seen uint64
}

// engine decides the fate of one direction's datagrams.
type engine struct {
	dir   Dir
	rules []crule
	saved []ruleState
}

// compile builds the engine of direction d. Rules that can never fire are
// left out, so that a direction whose rules are all zero passes through.
func compile(cfg *Config, d Dir) *engine {
	e := &engine{dir: d}
	for i, r := range cfg.Rules {
		if r.dir()&d == 0 || r.Nth == 0 && r.Prob == 0 {
			continue
		}
		e.rules = append(e.rules, crule{Rule: r})
		cr := &e.rules[len(e.rules)-1]
		cr.Opcodes = slices.Clone(r.Opcodes)
		for _, op := range r.Opcodes {
			cr.filtered = true
			cr.ops[op>>6] |= 1 << (op & 63)
		}
		if r.Nth > 0 {
			cr.first = uint64(r.Nth)
			cr.last = uint64(r.Nth + r.count() - 1)
		} else if t := math.Ldexp(r.Prob, 64); t >= math.Ldexp(1, 64) {
			cr.always = true
		} else {
			cr.thresh = uint64(t)
		}
		// One stream per direction and rule (and Config.Stream); the
		// constants only spread the seeds apart.
		cr.pcg = *rand.NewPCG(cfg.Seed, 0x9E3779B97F4A7C15*(uint64(d)<<32|uint64(i+1))^0xBF58476D1CE4E5B9*cfg.Stream)
	}
	// Point each generator at its rule only now: the slice has stopped
	// growing.
	for i := range e.rules {
		e.rules[i].rng = rand.New(&e.rules[i].pcg)
	}
	e.saved = make([]ruleState, len(e.rules))
	return e
}

// decision is the fate of one datagram: no rule (pass) or the rule that
// fired, and for Corrupt the bit to flip (-1: none, an empty datagram).
type decision struct {
	rule *crule
	bit  int
}

// decide advances every rule that applies to b and returns the first that
// fires. It depends only on the rules' states and b. A Corrupt rule that
// fires draws its bit whether or not it wins, so that how far its
// generator advances does not depend on the rules before it.
func (e *engine) decide(b []byte) decision {
	var fired *crule
	bit := -1
	for i := range e.rules {
		r := &e.rules[i]
		if !r.matches(b) {
			continue
		}
		r.seen++
		var hit bool
		switch {
		case r.first > 0:
			hit = r.seen >= r.first && r.seen <= r.last
		case r.always:
			hit = true
		default:
			hit = r.pcg.Uint64() < r.thresh
		}
		if !hit {
			continue
		}
		k := -1
		if r.Action == Corrupt {
			if start := corruptStart(b); len(b) > start {
				k = r.rng.IntN((len(b) - start) * 8)
			}
		}
		if fired == nil {
			fired, bit = r, k
		}
	}
	return decision{rule: fired, bit: bit}
}

// corruptStart is the first byte Corrupt may flip: the one after the BTH
// for a datagram that can hold a BTH and an ICRC, else the first.
func corruptStart(b []byte) int {
	if len(b) >= packet.BTHSize+packet.ICRCSize {
		return packet.BTHSize
	}
	return 0
}

// flip flips bit (from decide) of b, a copy of the datagram.
func flip(b []byte, bit int) {
	if bit >= 0 {
		b[corruptStart(b)+bit/8] ^= 1 << (bit % 8)
	}
}

// save records the rules' states (before a run of decisions).
func (e *engine) save() {
	for i := range e.rules {
		e.saved[i] = ruleState{e.rules[i].pcg, e.rules[i].seen}
	}
}

// restore goes back to the saved states.
func (e *engine) restore() {
	for i := range e.rules {
		e.rules[i].pcg, e.rules[i].seen = e.saved[i].pcg, e.saved[i].seen
	}
}

// dgram is a queued copy of a datagram.
type dgram struct {
	data  []byte
	addr  netip.AddrPort
	local netip.Addr
	tos   uint8
	ttl   uint8
	left  int       // Reorder: datagrams still to pass before release; 0 for Delay
	due   time.Time // release time (Delay) or latest release (Reorder)
	by    int       // send side: the caller's index whose datagram released it (sendSide.tick)
	first bool      // send side: released, then refused; goes out before the next datagram (releaseFirst)
}

// queue holds a direction's held and delayed datagrams, by due time, and
// recycles datagram copies.
type queue struct {
	pend   []*dgram // sorted by due; equal dues in arrival order
	nheld  int      // entries of pend with left > 0
	nfirst int      // entries of pend marked first
	free   []*dgram
	max    int
}

func (q *queue) get(m *netdev.Message) *dgram {
	var d *dgram
	if n := len(q.free); n > 0 {
		d, q.free = q.free[n-1], q.free[:n-1]
	} else {
		d = new(dgram)
	}
	d.data = append(d.data[:0], m.Buf[:m.N]...)
	d.addr, d.local, d.tos, d.ttl, d.left, d.first = m.Addr, m.Local, m.TOS, m.TTL, 0, false
	return d
}

// message is the datagram as a Message to send.
func (d *dgram) message() netdev.Message {
	return netdev.Message{Buf: d.data, N: len(d.data), Addr: d.addr, Local: d.local, TOS: d.tos, TTL: d.ttl}
}

func (q *queue) put(d *dgram) {
	if len(q.free) < q.max {
		q.free = append(q.free, d)
	}
}

// hold adds d to pend; it reports false if pend is full.
func (q *queue) hold(d *dgram) bool {
	if len(q.pend) >= q.max {
		return false
	}
	i, _ := slices.BinarySearchFunc(q.pend, d.due, func(e *dgram, t time.Time) int {
		if e.due.After(t) {
			return 1
		}
		return -1 // equal dues: after the existing ones
	})
	q.pend = slices.Insert(q.pend, i, d)
	if d.left > 0 {
		q.nheld++
	}
	if d.first {
		q.nfirst++
	}
	return true
}

// unmark clears d's first mark as d leaves pend.
func (q *queue) unmark(d *dgram) {
	if d.first {
		d.first = false
		q.nfirst--
	}
}

// tick counts one datagram past every held one and passes those whose
// count ran out to emit, in due order.
func (q *queue) tick(emit func(*dgram)) {
	if q.nheld == 0 {
		return
	}
	j := 0
	for _, d := range q.pend {
		if d.left > 0 {
			d.left--
			if d.left == 0 {
				q.nheld--
				q.unmark(d)
				emit(d)
				continue
			}
		}
		q.pend[j] = d
		j++
	}
	clear(q.pend[j:])
	q.pend = q.pend[:j]
}

// releaseFirst passes the entries marked first to emit, in due order.
func (q *queue) releaseFirst(emit func(*dgram)) {
	if q.nfirst == 0 {
		return
	}
	j := 0
	for _, d := range q.pend {
		if d.first {
			q.unmark(d)
			if d.left > 0 {
				q.nheld--
			}
			emit(d)
			continue
		}
		q.pend[j] = d
		j++
	}
	clear(q.pend[j:])
	q.pend = q.pend[:j]
}

// untick takes back k datagrams counted past the held entries (tick) that
// are still held: they wait for k more. (Those marked first were not
// counted past.)
func (q *queue) untick(k int) {
	for _, d := range q.pend {
		if d.left > 0 && !d.first {
			d.left += k
		}
	}
}

// due passes every entry due at now to emit, in due order.
func (q *queue) releaseDue(now time.Time, emit func(*dgram)) {
	i := 0
	for ; i < len(q.pend) && !q.pend[i].due.After(now); i++ {
		if q.pend[i].left > 0 {
			q.nheld--
		}
		q.unmark(q.pend[i])
		emit(q.pend[i])
	}
	if i > 0 {
		n := copy(q.pend, q.pend[i:])
		clear(q.pend[n:])
		q.pend = q.pend[:n]
	}
}

// next returns the earliest due time, if any.
func (q *queue) next() (time.Time, bool) {
	if len(q.pend) == 0 {
		return time.Time{}, false
	}
	return q.pend[0].due, true
}

// drain discards every entry and returns how many there were.
func (q *queue) drain() int {
	n := len(q.pend)
	clear(q.pend)
	q.pend, q.nheld, q.nfirst = q.pend[:0], 0, 0
	return n
}
