package faults_test

import (
	"errors"
	"slices"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/faults"
	"github.com/gorxe/gorxe/packet"
)

func mustRules(t testing.TB, specs ...string) []faults.Rule {
	t.Helper()
	var rules []faults.Rule
	for _, s := range specs {
		r, err := faults.ParseRule(s)
		require.NoError(t, err, s)
		rules = append(rules, r)
	}
	return rules
}

func statOf(s faults.DirStats, a faults.Action) uint64 {
	switch a {
	case faults.Drop:
		return s.Dropped
	case faults.Duplicate:
		return s.Duplicated
	case faults.Reorder:
		return s.Reordered
	case faults.Delay:
		return s.Delayed
	case faults.Corrupt:
		return s.Corrupted
	case faults.LocalDrop:
		return s.LocalDrops
	}
	panic(a)
}

// TestActions runs every action, by probability and by script, on each
// direction, over 8 packets alternating RC_SEND_MIDDLE (even PSNs) and
// RC_RDMA_READ_RESPONSE_MIDDLE (odd PSNs).
func TestActions(t *testing.T) {
	tests := []struct {
		rule string
		want []int // PSNs received, in order
		hit  []int // PSNs acted on (the trace), in order
		bad  []int // PSNs received with a bad ICRC
	}{
		{"drop=1", nil, seq(8), nil},
		{"drop=#3", []int{0, 1, 3, 4, 5, 6, 7}, []int{2}, nil},
		{"drop=RC_RDMA_READ_RESPONSE_MIDDLE#3", []int{0, 1, 2, 3, 4, 6, 7}, []int{5}, nil},
		{"drop=0x0e#1-2", []int{0, 2, 4, 5, 6, 7}, []int{1, 3}, nil},
		{"drop=100%,op=RC_SEND_MIDDLE", []int{1, 3, 5, 7}, []int{0, 2, 4, 6}, nil},
		{"drop=0", seq(8), nil, nil},
		{"dup=1", []int{0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7}, seq(8), nil},
		{"dup=#2-3", []int{0, 1, 1, 2, 2, 3, 4, 5, 6, 7}, []int{1, 2}, nil},
		{"reorder=1,op=RC_SEND_MIDDLE", []int{1, 0, 3, 2, 5, 4, 7, 6}, []int{0, 2, 4, 6}, nil},
		{"reorder=#2,by=2", []int{0, 2, 3, 1, 4, 5, 6, 7}, []int{1}, nil},
		// A held datagram is one of the datagrams that pass another.
		{"reorder=#1-2", []int{0, 2, 1, 3, 4, 5, 6, 7}, []int{0, 1}, nil},
		{"reorder=#1-2,by=2", []int{2, 0, 3, 1, 4, 5, 6, 7}, []int{0, 1}, nil},
		// Too few datagrams follow: the hold times out.
		{"reorder=#7,by=5,max=3ms", []int{0, 1, 2, 3, 4, 5, 7, 6}, []int{6}, nil},
		{"delay=#1,by=10ms", []int{1, 2, 3, 4, 5, 6, 7, 0}, []int{0}, nil},
		{"delay=1,by=5ms", seq(8), seq(8), nil},
		{"corrupt=1", seq(8), seq(8), seq(8)},
		{"corrupt=RC_SEND_MIDDLE#2", seq(8), []int{2}, []int{2}},
	}
	for _, dir := range []faults.Dir{faults.Send, faults.Recv} {
		for _, tc := range tests {
			t.Run(dir.String()+"/"+tc.rule, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					rules := mustRules(t, tc.rule+",dir="+dir.String())
					var sendCfg, recvCfg faults.Config
					if dir == faults.Send {
						sendCfg.Rules = rules
					} else {
						recvCfg.Rules = rules
					}
					pkts := alternating(t, 8)
					tr := run(t, netdev.PipeOptions{}, sendCfg, recvCfg, pkts, 3)
					require.ErrorIs(t, tr.readErr, netErrClosed)

					require.Equal(t, tc.want, psns(tr.recs), "received")
					trace, other, stats := tr.sendTrace, tr.recvTrace, tr.sendStats.Send
					if dir == faults.Recv {
						trace, other, stats = tr.recvTrace, tr.sendTrace, tr.recvStats.Recv
					}
					require.Empty(t, other, "the other direction did nothing")
					var hit []int
					for _, e := range trace {
						require.Equal(t, dir, e.dir)
						require.Equal(t, rules[0].Action, e.action)
						require.Equal(t, packet.BTH(pkts[e.psn]).Opcode(), e.op)
						hit = append(hit, e.psn)
					}
					require.Equal(t, tc.hit, hit, "trace")
					require.Equal(t, uint64(len(tc.hit)), statOf(stats, rules[0].Action))
					require.Zero(t, stats.Lost)

					var bad []int
					for _, r := range tr.recs {
						orig := pkts[r.psn]
						require.Len(t, r.data, len(orig), "length unchanged")
						require.Equal(t, orig[:packet.BTHSize], r.data[:packet.BTHSize], "BTH unchanged")
						_, err := packet.Parse(r.data)
						require.NoError(t, err, "still parses")
						if err := pipePH.CheckICRC(r.data); err != nil {
							require.ErrorIs(t, err, packet.ErrBadICRC)
							_, ok := pipePH.RecoverIPv4ID(r.data)
							require.False(t, ok, "no IPv4 ID explains a corrupted packet")
							bad = append(bad, r.psn)
						} else {
							require.Equal(t, orig, r.data)
						}
					}
					require.Equal(t, tc.bad, bad, "bad ICRCs")
				})
			})
		}
	}
}

var netErrClosed = func() error {
	a, _ := netdev.NewPipe()
	a.Close()
	_, err := a.ReadBatch(make([]netdev.Message, 1))
	return errors.Unwrap(err)
}()

// TestDelayTiming checks that a delayed datagram comes out when its time
// comes, that the others are not held up, and that WriteBatch does not
// wait.
func TestDelayTiming(t *testing.T) {
	for _, dir := range []string{"send", "recv"} {
		t.Run(dir, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rules := mustRules(t, "delay=#2,by=7ms,dir="+dir, "delay=#4,by=3ms,dir="+dir)
				cfg := faults.Config{Rules: rules}
				sendCfg, recvCfg := cfg, faults.Config{}
				if dir == "recv" {
					sendCfg, recvCfg = recvCfg, sendCfg
				}
				a, b := netdev.NewPipe()
				fa, fb := faults.Wrap(a, sendCfg), faults.Wrap(b, recvCfg)
				defer fa.Close()
				col := collect(fb)
				start := time.Now()
				send(t, fa, alternating(t, 5), 1)
				require.Equal(t, start, time.Now(), "WriteBatch does not sleep")
				time.Sleep(time.Second)
				synctest.Wait()
				fa.Close()
				fb.Close()
				<-col.done
				recs := col.get()
				require.Equal(t, []int{0, 2, 4, 3, 1}, psns(recs))
				delays := map[int]time.Duration{1: 7 * time.Millisecond, 3: 3 * time.Millisecond}
				for _, r := range recs {
					require.Equal(t, delays[r.psn], r.at.Sub(start), "psn %d", r.psn)
				}
			})
		})
	}
}

// TestOpcodeFilterAndDirection checks that rules keep to their opcodes and
// direction, and that a rule for both directions acts on both.
func TestOpcodeFilterAndDirection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A's sends and receives; B echoes nothing, so A receives what B sends.
		a, b := netdev.NewPipe()
		var tr tracer
		fa := faults.Wrap(a, faults.Config{Trace: tr.hook, Rules: mustRules(t,
			"drop=1,op=RC_ACKNOWLEDGE,dir=send",
			"drop=1,op=RC_RDMA_READ_RESPONSE_MIDDLE,dir=recv",
			"dup=1,op=RC_SEND_LAST", // both ways
		)})
		defer fa.Close()
		colB := collect(b)
		colA := collect(fa)
		pkts := mixed(t, 30)
		send(t, fa, pkts, 4)
		msgs := make([]netdev.Message, len(pkts))
		for i, p := range pkts {
			msgs[i] = netdev.Message{Buf: p, N: len(p), Addr: netdev.DefaultPipeAddrA}
		}
		n, err := b.WriteBatch(msgs)
		require.NoError(t, err)
		require.Equal(t, len(pkts), n)
		synctest.Wait()
		fa.Close()
		<-colA.done
		<-colB.done

		expect := func(drop packet.Opcode) []int {
			var want []int
			for i, p := range pkts {
				switch packet.BTH(p).Opcode() {
				case drop:
				case packet.RCSendLast:
					want = append(want, i, i)
				default:
					want = append(want, i)
				}
			}
			return want
		}
		require.Equal(t, expect(packet.RCAcknowledge), psns(colB.get()), "A's sends")
		require.Equal(t, expect(packet.RCRDMAReadResponseMiddle), psns(colA.get()), "A's receives")
		for _, e := range tr.get() {
			switch e.action {
			case faults.Drop:
				if e.dir == faults.Send {
					require.Equal(t, packet.RCAcknowledge, e.op)
				} else {
					require.Equal(t, packet.RCRDMAReadResponseMiddle, e.op)
				}
			case faults.Duplicate:
				require.Equal(t, packet.RCSendLast, e.op)
			}
		}
		st := fa.Stats()
		require.Equal(t, uint64(5), st.Send.Dropped)
		require.Equal(t, uint64(5), st.Recv.Dropped)
		require.Equal(t, uint64(5), st.Send.Duplicated)
		require.Equal(t, uint64(5), st.Recv.Duplicated)
	})
}

// TestDeterminism runs a mix of every action by probability twice with the
// same seed, batching the sends differently, and once with another seed.
func TestDeterminism(t *testing.T) {
	const n = 3000
	cfg := func(seed uint64, dir string) faults.Config {
		specs := []string{"drop=0.05", "dup=0.05", "reorder=0.05,by=3", "delay=0.03,by=2ms", "corrupt=0.05", "drop=RC_ACKNOWLEDGE#7-9"}
		if dir == "send" {
			specs = append(specs, "local-drop=0.05")
		}
		for i := range specs {
			specs[i] += ",dir=" + dir
		}
		return faults.Config{Seed: seed, Rules: mustRules(t, specs...)}
	}
	pkts := mixed(t, n)
	runSeed := func(seed uint64, batches ...int) transfer {
		var tr transfer
		synctest.Test(t, func(t *testing.T) {
			tr = run(t, netdev.PipeOptions{Depth: 4 * n}, cfg(seed, "send"), cfg(seed, "recv"), pkts, batches...)
		})
		return tr
	}
	first := runSeed(42, 1)
	again := runSeed(42, 7, 64, 3, 1000)
	other := runSeed(43, 64)

	require.NotEmpty(t, first.sendTrace)
	require.NotEmpty(t, first.recvTrace)
	for _, a := range []faults.Action{faults.Drop, faults.Duplicate, faults.Reorder, faults.Delay, faults.Corrupt} {
		require.NotZero(t, statOf(first.sendStats.Send, a), "send %v", a)
		require.NotZero(t, statOf(first.recvStats.Recv, a), "recv %v", a)
	}
	require.NotZero(t, first.sendStats.Send.LocalDrops)
	require.Equal(t, first.sendTrace, again.sendTrace)
	require.Equal(t, first.recvTrace, again.recvTrace)
	require.Equal(t, first.sendStats, again.sendStats)
	require.Equal(t, first.recvStats, again.recvStats)
	require.Equal(t, len(first.recs), len(again.recs))
	for i := range first.recs {
		require.Equal(t, first.recs[i].data, again.recs[i].data, "datagram %d", i)
	}
	require.NotEqual(t, first.sendTrace, other.sendTrace)
	require.NotEqual(t, first.recvTrace, other.recvTrace)
}

// TestReorderLosesNothing reorders by probability in both directions, with
// holds released by later datagrams and by time-outs: every datagram
// arrives exactly once, and not in order.
func TestReorderLosesNothing(t *testing.T) {
	for _, spec := range []string{"reorder=0.3,by=3", "reorder=1,by=2,op=RC_SEND_MIDDLE|RC_SEND_LAST", "reorder=0.5,by=50,max=1ms"} {
		t.Run(spec, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const n = 1000
				cfg := faults.Config{Seed: 7, Rules: mustRules(t, spec)}
				tr := run(t, netdev.PipeOptions{Depth: 2 * n}, cfg, cfg, mixed(t, n), 16)
				got := psns(tr.recs)
				require.NotEqual(t, seq(n), got, "reordered")
				slices.Sort(got)
				require.Equal(t, seq(n), got, "each datagram once")
				require.NotZero(t, tr.sendStats.Send.Reordered)
				require.NotZero(t, tr.recvStats.Recv.Reordered)
				require.Zero(t, tr.sendStats.Send.Lost+tr.recvStats.Recv.Lost)
			})
		})
	}
}

// TestLocalDrop checks that an emulated local drop is the error a full
// pipe (or qdisc) gives, and that the datagram can be sent again.
func TestLocalDrop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The real thing: a full pipe.
		x, _ := netdev.NewPipeWith(netdev.PipeOptions{Depth: 1})
		pkts := alternating(t, 5)
		_, realErr := x.WriteBatch([]netdev.Message{message(pkts[0]), message(pkts[1])})
		require.ErrorIs(t, realErr, netdev.ErrLocalDrop)
		x.Close()

		a, b := netdev.NewPipe()
		fa := faults.Wrap(a, faults.Config{Rules: mustRules(t, "local-drop=#3")})
		defer fa.Close()
		col := collect(b)
		msgs := make([]netdev.Message, len(pkts))
		for i, p := range pkts {
			msgs[i] = message(p)
		}
		n, err := fa.WriteBatch(msgs)
		require.Equal(t, 2, n)
		require.ErrorIs(t, err, netdev.ErrLocalDrop)
		require.ErrorIs(t, err, syscall.ENOBUFS)
		var de netdev.DropError
		require.ErrorAs(t, err, &de)
		require.Equal(t, syscall.ENOBUFS, de.Errno)
		require.Equal(t, realErr, err, "the same error as netdev's own")

		n, err = fa.WriteBatch(msgs[n:])
		require.NoError(t, err)
		require.Equal(t, 3, n)
		synctest.Wait()
		fa.Close()
		<-col.done
		require.Equal(t, seq(5), psns(col.get()))
		require.Equal(t, uint64(1), fa.Stats().Send.LocalDrops)

		_, err = faults.ParseRule("local-drop=0.5,dir=recv")
		require.ErrorIs(t, err, faults.ErrRule)
	})
}

// TestInnerRefusal checks that when the inner Conn refuses a datagram the
// decisions about it and those after it are taken back: a scripted rule
// still hits the datagram it names when they are sent again.
func TestInnerRefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := netdev.NewPipeWith(netdev.PipeOptions{Depth: 4})
		var tr tracer
		fa := faults.Wrap(a, faults.Config{Trace: tr.hook, Rules: mustRules(t, "drop=#8", "corrupt=#10")})
		defer fa.Close()
		pkts := alternating(t, 10)
		msgs := make([]netdev.Message, len(pkts))
		for i, p := range pkts {
			msgs[i] = message(p)
		}
		var got []int
		drain := func() {
			in := make([]netdev.Message, 8)
			for i := range in {
				in[i].Buf = make([]byte, 256)
			}
			n, err := b.ReadBatch(in)
			require.NoError(t, err)
			for _, m := range in[:n] {
				got = append(got, int(packet.BTH(m.Buf).PSN()))
			}
		}
		n, err := fa.WriteBatch(msgs)
		require.ErrorIs(t, err, netdev.ErrLocalDrop)
		require.Equal(t, 4, n, "the pipe holds 4")
		drain()
		rest := msgs[n:]
		n, err = fa.WriteBatch(rest)
		require.ErrorIs(t, err, netdev.ErrLocalDrop)
		require.Equal(t, 5, n, "4 more went out and the 8th was dropped on the way")
		drain()
		n, err = fa.WriteBatch(rest[n:])
		require.NoError(t, err)
		require.Equal(t, 1, n)
		drain()
		require.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 8, 9}, got)
		require.Equal(t, []event{
			{faults.Send, faults.Drop, packet.RCRDMAReadResponseMiddle, 7},
			{faults.Send, faults.Corrupt, packet.RCRDMAReadResponseMiddle, 9},
		}, tr.get())
	})
}

// TestQueueFull checks that delayed datagrams beyond MaxQueue are lost and
// counted, each way.
func TestQueueFull(t *testing.T) {
	for _, dir := range []faults.Dir{faults.Send, faults.Recv} {
		t.Run(dir.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := faults.Config{MaxQueue: 4, Rules: mustRules(t, "delay=1,by=100ms,dir="+dir.String())}
				sendCfg, recvCfg := cfg, faults.Config{}
				if dir == faults.Recv {
					sendCfg, recvCfg = recvCfg, sendCfg
				}
				tr := run(t, netdev.PipeOptions{}, sendCfg, recvCfg, alternating(t, 10))
				st, trace := tr.sendStats.Send, tr.sendTrace
				if dir == faults.Recv {
					st, trace = tr.recvStats.Recv, tr.recvTrace
				}
				require.Equal(t, seq(4), psns(tr.recs))
				require.Equal(t, uint64(4), st.Delayed)
				require.Equal(t, uint64(6), st.Lost)
				require.Len(t, trace, 4, "the lost ones were not delayed")
				for _, e := range trace {
					require.Equal(t, faults.Delay, e.action)
				}
			})
		})
	}
}

// TestClose checks that Close unblocks ReadBatch and WriteBatch (with and
// without rules in the way) and fails later calls.
func TestClose(t *testing.T) {
	configs := map[string]faults.Config{
		"pass-through": {},
		"rules":        {Rules: mustRules(t, "drop=#100,dir=send", "delay=#100,dir=recv")},
	}
	for name, cfg := range configs {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, _ := netdev.NewPipeWith(netdev.PipeOptions{Depth: 1, BlockWhenFull: true})
				fa := faults.Wrap(a, cfg)
				defer fa.Close()
				var wg sync.WaitGroup
				var readErr, writeErr error
				wg.Add(2)
				go func() {
					defer wg.Done()
					_, readErr = fa.ReadBatch(make([]netdev.Message, 1))
				}()
				go func() {
					defer wg.Done()
					// The second datagram waits for room that never comes.
					p := alternating(t, 2)
					_, writeErr = fa.WriteBatch([]netdev.Message{message(p[0]), message(p[1])})
				}()
				synctest.Wait()
				require.NoError(t, fa.Close())
				require.NoError(t, fa.Close(), "closing twice")
				wg.Wait()
				require.True(t, isClosed(readErr), "%v", readErr)
				require.True(t, isClosed(writeErr), "%v", writeErr)
				_, err := fa.WriteBatch([]netdev.Message{message(alternating(t, 1)[0])})
				require.True(t, isClosed(err), "%v", err)
				_, err = fa.ReadBatch(make([]netdev.Message, 1))
				require.True(t, isClosed(err), "%v", err)
			})
		})
	}
}

// TestCloseDiscardsHeld checks that Close discards held and delayed
// datagrams and counts them.
func TestCloseDiscardsHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := netdev.NewPipe()
		fa := faults.Wrap(a, faults.Config{Rules: mustRules(t, "delay=1,by=1h", "reorder=1,by=9")})
		defer fa.Close()
		col := collect(fa)
		send(t, fa, alternating(t, 2))
		msgs := make([]netdev.Message, 3)
		for i, p := range alternating(t, 3) {
			msgs[i] = netdev.Message{Buf: p, N: len(p), Addr: netdev.DefaultPipeAddrA}
		}
		_, err := b.WriteBatch(msgs)
		require.NoError(t, err)
		synctest.Wait()
		require.NoError(t, fa.Close())
		<-col.done
		require.Empty(t, col.get())
		st := fa.Stats()
		require.Equal(t, faults.DirStats{Delayed: 2, Lost: 2}, st.Send)
		require.Equal(t, faults.DirStats{Delayed: 3, Lost: 3}, st.Recv)
	})
}

// TestAllocs checks that a Conn without rules (or with rules that never
// fire) allocates nothing, and that one with rules allocates nothing in
// steady state either.
func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	tests := []struct {
		name       string
		send, recv []string
	}{
		{"pass-through", nil, []string{"drop=0", "dup=0,dir=recv"}},
		{"rules", []string{"drop=0.1,dir=send", "corrupt=0.1,dir=send", "dup=0.1,dir=send"},
			[]string{"corrupt=0.5,dir=recv"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := netdev.NewPipe()
			fa := faults.Wrap(a, faults.Config{Seed: 1, Rules: mustRules(t, tc.send...)})
			fb := faults.Wrap(b, faults.Config{Seed: 1, Rules: mustRules(t, tc.recv...)})
			defer fa.Close()
			pkts := alternating(t, 16)
			out := make([]netdev.Message, len(pkts))
			in := make([]netdev.Message, 64)
			for i, p := range pkts {
				out[i] = message(p)
			}
			for i := range in {
				in[i].Buf = make([]byte, 256)
			}
			var sent, got uint64
			step := func() {
				n, err := fa.WriteBatch(out)
				if err != nil || n != len(out) {
					t.Fatal(n, err)
				}
				sent += uint64(n)
				st := fa.Stats().Send
				for got < sent+st.Duplicated-st.Dropped {
					n, err := fb.ReadBatch(in)
					if err != nil {
						t.Fatal(err)
					}
					got += uint64(n)
				}
			}
			for range 100 {
				step() // warm up the pools
			}
			require.Zero(t, testing.AllocsPerRun(100, step))
		})
	}
}

func TestWrapPanicsOnInvalidConfig(t *testing.T) {
	a, _ := netdev.NewPipe()
	defer a.Close()
	require.Panics(t, func() { faults.Wrap(a, faults.Config{Rules: []faults.Rule{{Action: faults.Drop, Prob: 2}}}) })
	require.Panics(t, func() { faults.Wrap(a, faults.Config{Rules: []faults.Rule{{}}}) })
}

// TestRuleDefaults: a Reorder rule without by= lets one datagram pass
// before the held one, and without max= holds it at most 10 ms; a Delay
// rule without by= delays by 1 ms (ParseRule's grammar), each way.
func TestRuleDefaults(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		rule string
		want []int                 // PSNs received, in order
		late map[int]time.Duration // PSN: when it arrives, if not at once
	}{
		{"reorder=#1", []int{1, 0, 2, 3}, nil},
		{"reorder=#4", []int{0, 1, 2, 3}, map[int]time.Duration{3: 10 * ms}},
		{"delay=#2", []int{0, 2, 3, 1}, map[int]time.Duration{1: ms}},
	}
	for _, dir := range []faults.Dir{faults.Send, faults.Recv} {
		for _, tc := range tests {
			t.Run(dir.String()+"/"+tc.rule, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					cfg := faults.Config{Rules: mustRules(t, tc.rule+",dir="+dir.String())}
					sendCfg, recvCfg := cfg, faults.Config{}
					if dir == faults.Recv {
						sendCfg, recvCfg = recvCfg, sendCfg
					}
					tr := run(t, netdev.PipeOptions{}, sendCfg, recvCfg, alternating(t, 4), 1)
					require.Equal(t, tc.want, psns(tr.recs))
					for _, r := range tr.recs {
						require.Equal(t, tc.late[r.psn], r.at.Sub(tr.writeStart), "PSN %d", r.psn)
					}
				})
			})
		}
	}
}
