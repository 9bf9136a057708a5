package oob

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
	"github.com/stretchr/testify/require"
)

// segment is one TCP segment of a perftest transcript: who sent it ('C'
// or 'S') and its bytes.
type segment struct {
	from byte
	data []byte
}

// transcripts reads every transcript of real perftest 4.5-0.17 (version
// "6.06") in shared/reference/perftest-oob, found beside the repository
// or a directory above it; the test skips without them.
func transcripts(t *testing.T) map[string][]segment {
	t.Helper()
	const rel = "shared/reference/perftest-oob"
	dir, err := filepath.Abs(".")
	require.NoError(t, err)
	for {
		if st, err := os.Stat(filepath.Join(dir, rel)); err == nil && st.IsDir() {
			break
		}
		if filepath.Dir(dir) == dir {
			t.Skipf("no perftest transcripts in %s beside the repository", rel)
		}
		dir = filepath.Dir(dir)
	}
	files, err := filepath.Glob(filepath.Join(dir, rel, "*.txt"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	all := map[string][]segment{}
	for _, name := range files {
		f, err := os.Open(name)
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if line == "" || line[0] == '#' {
				continue
			}
			fs := strings.Fields(line)
			n, err := strconv.Atoi(fs[1])
			require.NoError(t, err)
			b, err := hex.DecodeString(fs[2])
			require.NoError(t, err)
			require.Len(t, b, n, line)
			all[filepath.Base(name)] = append(all[filepath.Base(name)], segment{fs[0][0], b})
		}
		require.NoError(t, sc.Err())
		f.Close()
	}
	return all
}

// TestGoldenMessages: every message real perftest sent parses, and ours
// encode it back byte for byte.
func TestGoldenMessages(t *testing.T) {
	for name, segs := range transcripts(t) {
		kinds := map[int]int{}
		for i, s := range segs {
			what := fmt.Sprintf("%s segment %d (%c, %d bytes)", name, i+1, s.from, len(s.data))
			kinds[len(s.data)]++
			switch len(s.data) {
			case VersionMsgSize:
				v := ParseVersionMsg(s.data)
				require.Equal(t, PeerVersion{Text: "6.06", Value: 6.06}, v, what)
				require.GreaterOrEqual(t, v.Value, MinPeerVersion)
			case 4: // page size, then cache line size
				require.Equal(t, s.data, Int32Msg(int(binary.BigEndian.Uint32(s.data))), what)
			case MTUMsgSize:
				enum := ParseMTUMsg(s.data)
				require.True(t, enum >= 1 && enum <= 5, what)
				require.Equal(t, s.data, MTUMsg(enum), what)
			case KeyMsgSize:
				k, err := ParseKeyMsg(s.data)
				require.NoError(t, err, what)
				require.Equal(t, s.data, k.Marshal(), what)
			case 8:
				v := binary.BigEndian.Uint64(s.data)
				require.Equal(t, s.data, Uint64Msg(v), what)
				require.Equal(t, s.data, DoubleMsg(math.Float64frombits(v)), what)
			case len("done\x00"):
				require.Equal(t, "done\x00", string(s.data), what)
			default:
				t.Fatalf("%s: a message of no known size", what)
			}
		}
		require.Equal(t, 2, kinds[VersionMsgSize], name)
		require.Positive(t, kinds[KeyMsgSize], name)
	}
}

// scriptPipe plays one end of a transcript: Send checks our message
// against the transcript's next one from our side, Recv returns the
// other side's next one.
type scriptPipe struct {
	t    *testing.T
	me   byte
	segs []segment
}

func (p *scriptPipe) next(from byte) []byte {
	p.t.Helper()
	require.NotEmpty(p.t, p.segs, "the transcript has ended, a message from %c expected", from)
	s := p.segs[0]
	require.Equal(p.t, string(from), string(s.from), "the transcript's next message is %c's (%d bytes)", s.from, len(s.data))
	p.segs = p.segs[1:]
	return s.data
}

func (p *scriptPipe) Send(b []byte) error {
	require.Equal(p.t, p.next(p.me), b)
	return nil
}

func (p *scriptPipe) Recv(b []byte) error {
	other := byte('S')
	if p.me == 'S' {
		other = 'C'
	}
	m := p.next(other)
	require.Len(p.t, b, len(m))
	copy(b, m)
	return nil
}

func (p *scriptPipe) Finish(bool) error { return nil }
func (p *scriptPipe) Close() error      { return nil }

// TestGoldenExchange replays every transcript through a Conn as client
// and as server, up to the closing "done": each step sends the
// transcript's bytes in the transcript's order and reads the peer's.
func TestGoldenExchange(t *testing.T) {
	for name, segs := range transcripts(t) {
		for _, me := range []byte{'C', 'S'} {
			t.Run(name+"/"+string(me), func(t *testing.T) {
				var steps []segment // our messages, in order
				for _, s := range segs {
					if string(s.data) == "done\x00" {
						break
					}
					if s.from == me {
						steps = append(steps, s)
					}
				}
				p := &scriptPipe{t: t, me: me, segs: segs}
				c := NewConn(p, me == 'C')
				for i := 0; i < len(steps); i++ {
					my := steps[i].data
					switch len(my) {
					case KeyMsgSize:
						k, err := ParseKeyMsg(my)
						require.NoError(t, err)
						_, err = c.Handshake("key", k)
						require.NoError(t, err)
					case 8: // five report values
						require.GreaterOrEqual(t, len(steps)-i, 5)
						v := func(j int) uint64 { return binary.BigEndian.Uint64(steps[i+j].data) }
						f := func(j int) float64 { return math.Float64frombits(v(j)) }
						_, err := c.ExchangeReports(report.BW{Size: v(0), Iters: v(1), Peak: f(2), Avg: f(3), MsgRate: f(4)})
						require.NoError(t, err)
						i += 4
					default:
						rem := make([]byte, len(my))
						require.NoError(t, c.Exchange("raw", my, rem))
					}
				}
				require.True(t, len(p.segs) == 0 || bytes.Equal(p.segs[0].data, []byte("done\x00")), "played to the closing done or the end")
			})
		}
	}
}
