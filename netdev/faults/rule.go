package faults

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gorxe/gorxe/packet"
)

// Dir is a direction of traffic through a Conn: datagrams it sends
// (WriteBatch), datagrams it receives (ReadBatch), or both.
type Dir uint8

// Directions.
const (
	Send Dir = 1 << iota // datagrams passed to WriteBatch
	Recv                 // datagrams returned by ReadBatch
	Both = Send | Recv
)

// String returns "send", "recv" or "both".
func (d Dir) String() string {
	switch d {
	case Send:
		return "send"
	case Recv:
		return "recv"
	case Both:
		return "both"
	}
	return "dir(" + strconv.Itoa(int(d)) + ")"
}

// Action is what a rule does to a datagram.
type Action uint8

// Actions. The zero Action is not valid in a Rule.
const (
	// Drop discards the datagram: on send it counts as sent but never
	// reaches the inner Conn; on receive ReadBatch never returns it.
	Drop Action = iota + 1
	// Duplicate delivers the datagram twice in a row.
	Duplicate
	// Reorder holds the datagram back and delivers it right after the
	// next Rule.Depth datagrams of the same direction, or when
	// Rule.Delay has passed, whichever comes first.
	Reorder
	// Delay delivers the datagram Rule.Delay later. Datagrams behind it
	// are not held up, so a delay also reorders.
	Delay
	// Corrupt flips one bit of the datagram after the BTH (extension
	// headers, payload, pad or ICRC), so its length is unchanged, packet.Parse
	// still accepts it and its ICRC no longer matches.
	Corrupt
	// LocalDrop (send only) refuses the datagram as a full qdisc would:
	// WriteBatch returns the number sent before it and a
	// netdev.DropError with syscall.ENOBUFS.
	LocalDrop

	numActions = iota + 1
)

var actionNames = [numActions]string{
	Drop:      "drop",
	Duplicate: "dup",
	Reorder:   "reorder",
	Delay:     "delay",
	Corrupt:   "corrupt",
	LocalDrop: "local-drop",
}

// String returns the action's name in the rule grammar: "drop", "dup",
// "reorder", "delay", "corrupt" or "local-drop".
func (a Action) String() string {
	if a > 0 && a < numActions {
		return actionNames[a]
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// Defaults for a Rule's zero fields.
const (
	// DefaultDelay is a Delay rule's delay when Rule.Delay is zero.
	DefaultDelay = time.Millisecond
	// DefaultMaxHold is the longest a Reorder rule holds a datagram when
	// Rule.Delay is zero: well below any RC ACK timeout (IBA 9.7.6.1.3,
	// 4.096 µs × 2^timeout; rxe's default timeout 14 is 67 ms), so a
	// reordered datagram is not also a lost one.
	DefaultMaxHold = 10 * time.Millisecond
)

// Rule is one fault. It applies to the datagrams of its direction whose
// BTH opcode is in Opcodes (every datagram if Opcodes is empty) and fires
// either by probability (Prob) or by script (Nth and Count): a scripted
// rule fires on the Nth through (Nth+Count-1)th datagrams it applies to,
// counted from 1 since the Conn was wrapped.
//
// Every rule of a direction sees every datagram of that direction, in
// order; when several fire on one datagram the first in Config.Rules wins.
type Rule struct {
	Action Action

	// Dir is the direction the rule applies to. Zero means Both, except
	// for LocalDrop, which applies to sends only.
	Dir Dir

	// Opcodes limits the rule to datagrams with these BTH opcodes (a set:
	// ParseRule lists each once). A datagram shorter than a BTH matches
	// only a rule without Opcodes.
	Opcodes []packet.Opcode

	// Prob is the probability, in [0, 1], that the rule fires on a
	// datagram it applies to. It must be zero for a scripted rule.
	Prob float64

	// Nth, when positive, makes the rule scripted: it fires on the Nth
	// datagram it applies to (1-based) and on the Count-1 after it.
	Nth int
	// Count is how many datagrams in a row a scripted rule fires on,
	// starting with the Nth. Zero means 1.
	Count int

	// Depth is, for Reorder, how many later datagrams of the same
	// direction (of any opcode and fate) pass before the held one is
	// delivered. Zero means 1.
	Depth int

	// Delay is, for Delay, how long the datagram is delayed (zero means
	// DefaultDelay) and, for Reorder, the longest it is held (zero means
	// DefaultMaxHold).
	Delay time.Duration
}

// dir returns the rule's direction with the default applied.
func (r *Rule) dir() Dir {
	if r.Dir != 0 {
		return r.Dir
	}
	if r.Action == LocalDrop {
		return Send
	}
	return Both
}

func (r *Rule) depth() int {
	if r.Depth > 0 {
		return r.Depth
	}
	return 1
}

func (r *Rule) delay() time.Duration {
	switch {
	case r.Delay > 0:
		return r.Delay
	case r.Action == Reorder:
		return DefaultMaxHold
	}
	return DefaultDelay
}

func (r *Rule) count() int {
	if r.Count > 0 {
		return r.Count
	}
	return 1
}

// ErrRule is wrapped by every error of ParseRule and Rule.Validate.
var ErrRule = errors.New("faults: invalid rule")

func ruleErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrRule}, args...)...)
}

// Validate reports whether r is a rule Wrap accepts.
func (r *Rule) Validate() error {
	if r.Action == 0 || r.Action >= numActions {
		return ruleErr("unknown action %d", r.Action)
	}
	if r.Dir > Both {
		return ruleErr("unknown direction %d", r.Dir)
	}
	if r.Action == LocalDrop && r.dir() != Send {
		return ruleErr("local-drop applies to sends only")
	}
	if math.IsNaN(r.Prob) || r.Prob < 0 || r.Prob > 1 {
		return ruleErr("probability %v outside [0, 1]", r.Prob)
	}
	if r.Nth < 0 || r.Count < 0 {
		return ruleErr("negative Nth or Count")
	}
	if r.Nth > 0 && r.Prob != 0 {
		return ruleErr("a rule is either scripted (Nth) or by probability, not both")
	}
	if r.Nth == 0 && r.Count != 0 {
		return ruleErr("Count without Nth")
	}
	if r.Depth < 0 || r.Delay < 0 {
		return ruleErr("negative Depth or Delay")
	}
	return nil
}

// String returns the rule in the grammar ParseRule reads: ParseRule gives
// back r, except that a Count of 1 comes back as 0 and an opcode listed
// twice in Opcodes once (the same rule).
func (r Rule) String() string {
	var b strings.Builder
	b.WriteString(r.Action.String())
	b.WriteByte('=')
	if r.Nth > 0 {
		b.WriteString(opcodeList(r.Opcodes))
		b.WriteByte('#')
		b.WriteString(strconv.Itoa(r.Nth))
		if r.Count > 1 {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(r.Nth + r.Count - 1))
		}
	} else {
		b.WriteString(strconv.FormatFloat(r.Prob, 'g', -1, 64))
		if len(r.Opcodes) > 0 {
			b.WriteString(",op=")
			b.WriteString(opcodeList(r.Opcodes))
		}
	}
	if r.Dir != 0 {
		b.WriteString(",dir=")
		b.WriteString(r.Dir.String())
	}
	switch r.Action {
	case Reorder:
		if r.Depth > 0 {
			b.WriteString(",by=" + strconv.Itoa(r.Depth))
		}
		if r.Delay > 0 {
			b.WriteString(",max=" + r.Delay.String())
		}
	case Delay:
		if r.Delay > 0 {
			b.WriteString(",by=" + r.Delay.String())
		}
	}
	return b.String()
}

// opcodeList writes ops as addOpcodes reads them: a known opcode by
// name, any other as "0x" and two hex digits (packet.Opcode.String's
// "OPCODE_0x.." is not a name the parser knows).
func opcodeList(ops []packet.Opcode) string {
	s := make([]string, len(ops))
	for i, op := range ops {
		if op.Valid() {
			s[i] = op.String()
		} else {
			s[i] = fmt.Sprintf("0x%02x", uint8(op))
		}
	}
	return strings.Join(s, "|")
}

// ParseRule reads a rule in this grammar (the --drop, --dup, --reorder,
// --delay, --corrupt and --local-drop flags of rxectl take the part after
// "ACTION="):
//
//	rule    = action "=" trigger { "," option }
//	action  = "drop" | "dup" | "reorder" | "delay" | "corrupt" | "local-drop"
//	trigger = prob | [ opcodes ] "#" N [ "-" M ]
//	prob    = a number in [0, 1] ("0.01", "1e-3") or a percentage ("1%")
//	opcodes = opcode { "|" opcode }
//	opcode  = a name as packet.Opcode.String gives it, in any case, with
//	          or without the IB_OPCODE_ prefix ("RC_RDMA_READ_RESPONSE_MIDDLE");
//	          a name prefix ending in "*" ("RC_RDMA_READ_RESPONSE_*", "UD_*")
//	          for every known opcode it starts; or "0x" and two hex digits
//	option  = "dir=" ( "send" | "recv" | "both" )
//	        | "op=" opcodes           limit the rule to these opcodes
//	        | "by=" K                 reorder: deliver after K later datagrams (default 1)
//	        | "by=" duration          delay: the delay (default 1ms), as time.ParseDuration reads it
//	        | "max=" duration         reorder: the longest hold (default 10ms)
//
// "#N" fires on the Nth datagram the rule applies to (counted from 1),
// "#N-M" on the Nth through Mth. The opcodes of the trigger and of every
// "op=" option make one set: the rule's Opcodes list each once, in the
// order first named. The direction defaults to both, except for
// local-drop (send only). Examples:
//
//	drop=0.01                               1% of datagrams, both ways
//	drop=RC_RDMA_READ_RESPONSE_MIDDLE#3     the 3rd READ_RESPONSE_MIDDLE (sent or received)
//	drop=RC_RDMA_READ_RESPONSE_MIDDLE#3,dir=send
//	dup=0.01,dir=recv                       1% of received datagrams delivered twice
//	reorder=0.05,by=3,op=RC_SEND_MIDDLE     5% of SEND_MIDDLEs overtaken by 3 datagrams
//	delay=1%,by=5ms
//	corrupt=#10-12                          the 10th, 11th and 12th datagrams each way
//	local-drop=0.001                        0.1% of sends fail with ENOBUFS
//
// The opcode separator "|" must be quoted in a shell.
func ParseRule(s string) (Rule, error) {
	var r Rule
	head, opts, _ := strings.Cut(s, ",")
	name, trig, ok := strings.Cut(head, "=")
	if !ok {
		return r, ruleErr("%q: want ACTION=TRIGGER", s)
	}
	name = strings.TrimSpace(name)
	for a := Drop; a < numActions; a++ {
		if strings.EqualFold(name, a.String()) {
			r.Action = a
		}
	}
	if r.Action == 0 {
		return r, ruleErr("%q: unknown action %q (want drop, dup, reorder, delay, corrupt or local-drop)", s, name)
	}
	if err := parseTrigger(&r, strings.TrimSpace(trig)); err != nil {
		return r, fmt.Errorf("%q: %w", s, err)
	}
	if opts != "" {
		for _, o := range strings.Split(opts, ",") {
			if err := parseOption(&r, strings.TrimSpace(o)); err != nil {
				return r, fmt.Errorf("%q: %w", s, err)
			}
		}
	}
	if err := r.Validate(); err != nil {
		return r, fmt.Errorf("%q: %w", s, err)
	}
	return r, nil
}

func parseTrigger(r *Rule, t string) error {
	if ops, script, ok := strings.Cut(t, "#"); ok {
		if ops != "" {
			if err := addOpcodes(r, ops); err != nil {
				return err
			}
		}
		first, last, isRange := strings.Cut(script, "-")
		n, err := strconv.Atoi(first)
		if err != nil || n < 1 {
			return ruleErr("%q: want #N with N >= 1", "#"+script)
		}
		r.Nth = n
		if isRange {
			m, err := strconv.Atoi(last)
			if err != nil || m < n {
				return ruleErr("%q: want #N-M with M >= N", "#"+script)
			}
			if m > n {
				r.Count = m - n + 1 // "#N-N" is "#N": Count 0
			}
		}
		return nil
	}
	t, percent := strings.CutSuffix(t, "%")
	p, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return ruleErr("trigger %q: want a probability, a percentage or [OPCODE]#N", t)
	}
	if percent {
		// N% is the decimal N × 10^-2: read with that exponent it is the
		// float nearest it, the one "0.0N" gives (N × 0.01 can be one
		// off: 57 × 0.01 is 0.5700000000000001). N with an exponent of
		// its own is divided instead.
		if q, err := strconv.ParseFloat(t+"e-2", 64); err == nil {
			p = q
		} else {
			p /= 100
		}
	}
	r.Prob = p
	return nil
}

func parseOption(r *Rule, o string) error {
	key, val, ok := strings.Cut(o, "=")
	if !ok {
		return ruleErr("option %q: want KEY=VALUE", o)
	}
	switch strings.ToLower(strings.TrimSpace(key)) {
	case "dir":
		switch strings.ToLower(val) {
		case "send", "tx", "out":
			r.Dir = Send
		case "recv", "rx", "in":
			r.Dir = Recv
		case "both":
			r.Dir = Both
		default:
			return ruleErr("dir=%q: want send, recv or both", val)
		}
	case "op":
		if err := addOpcodes(r, val); err != nil {
			return err
		}
	case "by":
		switch r.Action {
		case Reorder:
			k, err := strconv.Atoi(val)
			if err != nil || k < 1 {
				return ruleErr("by=%q: reorder wants a count of datagrams >= 1", val)
			}
			r.Depth = k
		case Delay:
			d, err := time.ParseDuration(val)
			if err != nil || d <= 0 {
				return ruleErr("by=%q: delay wants a positive duration such as 5ms", val)
			}
			r.Delay = d
		default:
			return ruleErr("by= applies to reorder and delay only")
		}
	case "max":
		if r.Action != Reorder {
			return ruleErr("max= applies to reorder only")
		}
		d, err := time.ParseDuration(val)
		if err != nil || d <= 0 {
			return ruleErr("max=%q: want a positive duration such as 10ms", val)
		}
		r.Delay = d
	default:
		return ruleErr("unknown option %q (want dir, op, by or max)", key)
	}
	return nil
}

// addOpcodes appends to r.Opcodes the opcodes s names, separated by "|",
// that it does not hold yet. A rule matches a set of opcodes (Wrap makes
// a bitmap of them), so an opcode named again, or given by two wildcards
// that overlap, or by the trigger and an "op=" option, adds nothing: a
// parsed rule lists each opcode once, in the order first named, at most
// the 256 there are however long the string.
func addOpcodes(r *Rule, s string) error {
	var seen [256]bool
	for _, op := range r.Opcodes {
		seen[op] = true
	}
	add := func(op packet.Opcode) {
		if !seen[op] {
			seen[op] = true
			r.Opcodes = append(r.Opcodes, op)
		}
	}
	for _, name := range strings.Split(s, "|") {
		name = strings.TrimSpace(name)
		if hex, ok := strings.CutPrefix(strings.ToLower(name), "0x"); ok {
			v, err := strconv.ParseUint(hex, 16, 8)
			if err != nil {
				return ruleErr("opcode %q: want 0x00 to 0xff", name)
			}
			add(packet.Opcode(v))
			continue
		}
		upper := strings.ToUpper(name)
		upper = strings.TrimPrefix(upper, "IB_OPCODE_")
		prefix, wild := strings.CutSuffix(upper, "*")
		found := false
		for v := range 256 {
			op := packet.Opcode(v)
			if !op.Valid() {
				continue
			}
			if op.String() == upper || wild && strings.HasPrefix(op.String(), prefix) {
				add(op)
				found = true
			}
		}
		if !found {
			return ruleErr("unknown opcode %q", name)
		}
	}
	return nil
}

// RuleFlag returns a flag.Value that parses each of its flag's values as
// the trigger and options of a rule of action a (the flag value of
// "--drop=0.01,dir=recv" is read as the rule "drop=0.01,dir=recv") and
// appends the rule to *rules. The flag may be repeated:
//
//	fs.Var(faults.RuleFlag(faults.Drop, &cfg.Rules), "drop", "drop datagrams: PROB or [OPCODE]#N, then ,dir=send|recv ,op=OPCODE")
func RuleFlag(a Action, rules *[]Rule) flag.Value { return &ruleFlag{a, rules} }

type ruleFlag struct {
	action Action
	rules  *[]Rule
}

func (f *ruleFlag) String() string {
	if f.rules == nil {
		return ""
	}
	var s []string
	for _, r := range *f.rules {
		if r.Action == f.action {
			_, v, _ := strings.Cut(r.String(), "=")
			s = append(s, v)
		}
	}
	return strings.Join(s, " ")
}

func (f *ruleFlag) Set(v string) error {
	r, err := ParseRule(f.action.String() + "=" + v)
	if err != nil {
		return err
	}
	*f.rules = append(*f.rules, r)
	return nil
}
