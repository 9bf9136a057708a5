package faults_test

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev/faults"
	"github.com/gorxe/gorxe/packet"
)

func TestParseRule(t *testing.T) {
	rrm := packet.RCRDMAReadResponseMiddle
	tests := []struct {
		in   string
		want faults.Rule
	}{
		{"drop=0.01", faults.Rule{Action: faults.Drop, Prob: 0.01}},
		{"drop=1e-3", faults.Rule{Action: faults.Drop, Prob: 0.001}},
		{"drop=50%", faults.Rule{Action: faults.Drop, Prob: 0.5}},
		{"DROP=1", faults.Rule{Action: faults.Drop, Prob: 1}},
		{"drop=RC_RDMA_READ_RESPONSE_MIDDLE#3", faults.Rule{Action: faults.Drop, Opcodes: []packet.Opcode{rrm}, Nth: 3}},
		{"drop=ib_opcode_rc_rdma_read_response_middle#3,dir=send",
			faults.Rule{Action: faults.Drop, Dir: faults.Send, Opcodes: []packet.Opcode{rrm}, Nth: 3}},
		{"drop=#5-7", faults.Rule{Action: faults.Drop, Nth: 5, Count: 3}},
		{"drop=#5-5", faults.Rule{Action: faults.Drop, Nth: 5}}, // "#N-N" is "#N"
		{"drop=0x11|0x12#2", faults.Rule{Action: faults.Drop, Opcodes: []packet.Opcode{packet.RCAcknowledge, packet.RCAtomicAcknowledge}, Nth: 2}},
		{"dup=0.01,dir=recv", faults.Rule{Action: faults.Duplicate, Dir: faults.Recv, Prob: 0.01}},
		{"dup=0.01, dir=both", faults.Rule{Action: faults.Duplicate, Dir: faults.Both, Prob: 0.01}},
		{"reorder=0.05,by=3,op=RC_SEND_MIDDLE,max=2ms",
			faults.Rule{Action: faults.Reorder, Prob: 0.05, Depth: 3, Opcodes: []packet.Opcode{packet.RCSendMiddle}, Delay: 2 * time.Millisecond}},
		{"delay=1%,by=5ms", faults.Rule{Action: faults.Delay, Prob: 0.01, Delay: 5 * time.Millisecond}},
		{"corrupt=RC_RDMA_READ_RESPONSE_*#1", faults.Rule{Action: faults.Corrupt, Nth: 1, Opcodes: []packet.Opcode{
			packet.RCRDMAReadResponseFirst, packet.RCRDMAReadResponseMiddle, packet.RCRDMAReadResponseLast, packet.RCRDMAReadResponseOnly}}},
		{"local-drop=0.001", faults.Rule{Action: faults.LocalDrop, Prob: 0.001}},
		{"local-drop=#2,dir=send", faults.Rule{Action: faults.LocalDrop, Dir: faults.Send, Nth: 2}},
		// The opcodes are a set: each once, in the order first named.
		{"drop=RC_SEND_ONLY|RC_SEND_ONLY#1", faults.Rule{Action: faults.Drop, Opcodes: []packet.Opcode{packet.RCSendOnly}, Nth: 1}},
		{"drop=0x04|rc_send_only|IB_OPCODE_RC_SEND_ONLY#1", faults.Rule{Action: faults.Drop, Opcodes: []packet.Opcode{packet.RCSendOnly}, Nth: 1}},
		{"drop=RC_SEND_ONLY#1,op=RC_SEND_LAST|RC_SEND_ONLY,op=RC_SEND_LAST",
			faults.Rule{Action: faults.Drop, Opcodes: []packet.Opcode{packet.RCSendOnly, packet.RCSendLast}, Nth: 1}},
		{"drop=RC_SEND_LAST_WITH_IMMEDIATE|RC_SEND_LAST*#1", faults.Rule{Action: faults.Drop, Nth: 1, Opcodes: []packet.Opcode{
			packet.RCSendLastWithImmediate, packet.RCSendLast, packet.RCSendLastWithInvalidate}}},
		{"drop=0.5,op=" + strings.Repeat("RC_ACKNOWLEDGE|", 1000) + "RC_ACKNOWLEDGE",
			faults.Rule{Action: faults.Drop, Prob: 0.5, Opcodes: []packet.Opcode{packet.RCAcknowledge}}},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := faults.ParseRule(tc.in)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			back, err := faults.ParseRule(got.String())
			require.NoError(t, err, got.String())
			require.Equal(t, got, back, "String round trip: %s", got.String())
		})
	}
}

// TestRuleStringScript: String writes a scripted rule's one datagram as
// "#N" (a Count of 0 or 1) and several as "#N-M".
func TestRuleStringScript(t *testing.T) {
	tests := []struct {
		count int
		want  string
	}{
		{0, "drop=#5"},
		{1, "drop=#5"},
		{2, "drop=#5-6"},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, faults.Rule{Action: faults.Drop, Nth: 5, Count: tc.count}.String(), "Count %d", tc.count)
	}
}

func TestParseRuleErrors(t *testing.T) {
	for _, in := range []string{
		"", "drop", "drop=", "smash=0.1", "drop=2", "drop=-0.1", "drop=NaN", "drop=abc",
		"drop=#0", "drop=#x", "drop=#5-3", "drop=NO_SUCH_OP#1", "drop=0xfff#1",
		"drop=0.1,dir=up", "drop=0.1,by=3", "drop=0.1,max=1ms", "drop=0.1,color=red", "drop=0.1,dir",
		"reorder=0.1,by=0", "reorder=0.1,by=1ms", "delay=0.1,by=3", "delay=0.1,by=-1ms",
		"local-drop=0.1,dir=recv", "local-drop=0.1,dir=both",
		"drop=#5-4", "delay=0.1,by=0s", "reorder=0.1,max=0s",
	} {
		_, err := faults.ParseRule(in)
		require.ErrorIs(t, err, faults.ErrRule, "%q", in)
	}
}

func TestValidate(t *testing.T) {
	bad := []faults.Rule{
		{},
		{Action: 99},
		{Action: faults.Drop, Dir: 9},
		{Action: faults.Drop, Prob: 0.5, Nth: 1},
		{Action: faults.Drop, Count: 2},
		{Action: faults.Drop, Nth: -1},
		{Action: faults.Reorder, Depth: -1},
		{Action: faults.LocalDrop, Dir: faults.Recv},
		{Action: faults.Drop, Dir: faults.Both + 1},
		{Action: faults.Drop, Nth: 1, Count: -1},
		{Action: faults.Delay, Prob: 0.5, Delay: -time.Millisecond},
		{Action: faults.LocalDrop + 1, Prob: 0.5}, // one past the last action
	}
	for _, r := range bad {
		require.ErrorIs(t, r.Validate(), faults.ErrRule, "%+v", r)
	}
	good := faults.Rule{Action: faults.LocalDrop, Nth: 1, Count: 2}
	require.NoError(t, good.Validate())
}

func TestRuleFlag(t *testing.T) {
	var rules []faults.Rule
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(faults.RuleFlag(faults.Drop, &rules), "drop", "")
	fs.Var(faults.RuleFlag(faults.Duplicate, &rules), "dup", "")
	fs.Var(faults.RuleFlag(faults.LocalDrop, &rules), "local-drop", "")
	err := fs.Parse([]string{"--drop=0.01", "--drop", "RC_ACKNOWLEDGE#3,dir=recv", "--dup=0.5", "--local-drop=#4"})
	require.NoError(t, err)
	require.Equal(t, []faults.Rule{
		{Action: faults.Drop, Prob: 0.01},
		{Action: faults.Drop, Dir: faults.Recv, Opcodes: []packet.Opcode{packet.RCAcknowledge}, Nth: 3},
		{Action: faults.Duplicate, Prob: 0.5},
		{Action: faults.LocalDrop, Nth: 4},
	}, rules)
	require.Equal(t, "0.01 RC_ACKNOWLEDGE#3,dir=recv", fs.Lookup("drop").Value.String())
	require.Error(t, fs.Parse([]string{"--dup=2"}))
}

func TestNames(t *testing.T) {
	require.Equal(t, "send", faults.Send.String())
	require.Equal(t, "recv", faults.Recv.String())
	require.Equal(t, "both", faults.Both.String())
	for a, name := range map[faults.Action]string{faults.Drop: "drop", faults.Duplicate: "dup", faults.Reorder: "reorder",
		faults.Delay: "delay", faults.Corrupt: "corrupt", faults.LocalDrop: "local-drop"} {
		require.Equal(t, name, a.String())
	}
}

// FuzzParseRule: a rule string never crashes the parser; every refusal
// wraps ErrRule, as ErrRule's doc comment promises; and a rule it accepts
// is valid, lists each opcode once (so at most the 256 there are, however
// long the string) and survives the String round trip.
func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"drop=0.01", "drop=RC_RDMA_READ_RESPONSE_MIDDLE#3,dir=send", "drop=#5-7",
		"reorder=0.05,by=3,op=RC_SEND_MIDDLE,max=2ms", "delay=1%,by=5ms", "corrupt=RC_RDMA_READ_RESPONSE_*#1",
		"local-drop=#2,dir=send", "dup=0.01, dir=both", "drop=0x11|0x12#2", "drop=RC_SEND_ONLY|0x04#1,op=RC_SEND_*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := faults.ParseRule(s)
		if err != nil {
			require.ErrorIs(t, err, faults.ErrRule, "%q", s)
			return
		}
		require.NoError(t, r.Validate(), s)
		var seen [256]bool
		for _, op := range r.Opcodes {
			require.False(t, seen[op], "%q: opcode %v listed twice", s, op)
			seen[op] = true
		}
		back, err := faults.ParseRule(r.String())
		require.NoError(t, err, "%q -> %q", s, r.String())
		require.Equal(t, r, back, "%q -> %q", s, r.String())
	})
}

// TestParseRulePercentage: "N%" is the probability N/100 written in
// decimal, the same number "0.0N" gives, so the rule prints back as the
// user wrote it in the report of a run (rxectl's "Faults" line).
func TestParseRulePercentage(t *testing.T) {
	for _, tc := range []struct {
		in   string
		prob float64
		back string
	}{
		{"drop=57%", 0.57, "drop=0.57"},
		{"drop=29%", 0.29, "drop=0.29"},
		{"drop=1.1%", 0.011, "drop=0.011"},
		{"drop=0.5%", 0.005, "drop=0.005"},
		{"drop=100%", 1, "drop=1"},
		{"drop=0%", 0, "drop=0"},
		{"drop=1e1%", 0.1, "drop=0.1"},
		{"delay=3%,by=5ms", 0.03, "delay=0.03,by=5ms"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			r, err := faults.ParseRule(tc.in)
			require.NoError(t, err)
			require.Equal(t, tc.prob, r.Prob)
			require.Equal(t, tc.back, r.String())
		})
	}
	for _, in := range []string{"drop=101%", "drop=-1%", "drop=%", "drop=NaN%", "drop=inf%"} {
		_, err := faults.ParseRule(in)
		require.ErrorIs(t, err, faults.ErrRule, "%q", in)
	}
}

// TestParseRuleWildcard: "*" alone is every known opcode, and only those;
// a name without "*" is that opcode only, not those it is a prefix of.
func TestParseRuleWildcard(t *testing.T) {
	for in, want := range map[string][]packet.Opcode{
		"drop=RC_SEND_LAST#1":       {packet.RCSendLast},
		"drop=RC_RDMA_WRITE_ONLY#1": {packet.RCRDMAWriteOnly},
		"drop=RC_SEND_LAST*#1":      {packet.RCSendLast, packet.RCSendLastWithImmediate, packet.RCSendLastWithInvalidate},
	} {
		r, err := faults.ParseRule(in)
		require.NoError(t, err, in)
		require.Equal(t, want, r.Opcodes, in)
	}
	var known []packet.Opcode
	for v := range 256 {
		if op := packet.Opcode(v); op.Valid() {
			known = append(known, op)
		}
	}
	for _, in := range []string{"drop=*#1", "drop=*|*#1", "drop=*|RC_*|UD_SEND_ONLY#1,op=*"} {
		r, err := faults.ParseRule(in)
		require.NoError(t, err, in)
		require.Equal(t, known, r.Opcodes, in)
	}
}

// TestRuleFlagUsage: the flag package prints a flag's default by calling
// String on a zero value of its type (flag.PrintDefaults); a RuleFlag's
// zero value has no rules and must not panic there.
func TestRuleFlagUsage(t *testing.T) {
	var rules []faults.Rule
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var out strings.Builder
	fs.SetOutput(&out)
	fs.Var(faults.RuleFlag(faults.Drop, &rules), "drop", "drop datagrams")
	fs.PrintDefaults()
	require.Contains(t, out.String(), "drop datagrams")
	require.NotContains(t, out.String(), "panic")
}
