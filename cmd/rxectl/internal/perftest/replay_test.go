package perftest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/oob"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
	"github.com/stretchr/testify/require"
)

// transcriptDir finds the byte transcripts of real perftest 4.5-0.17
// (version "6.06") in shared/reference/perftest-oob beside the repository
// or one of the directories above it: the TCP segments of the out-of-band
// exchange between two perftest processes.
func transcriptDir() string {
	const rel = "shared/reference/perftest-oob"
	dir, err := filepath.Abs(".")
	if err != nil {
		return rel
	}
	for {
		if st, err := os.Stat(filepath.Join(dir, rel)); err == nil && st.IsDir() {
			return filepath.Join(dir, rel)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return rel
		}
		dir = parent
	}
}

// segment is one transcript line: who sent it and what.
type segment struct {
	from byte // 'C' or 'S'
	data []byte
}

type transcript struct {
	name     string
	commands string
	segs     []segment
}

func loadTranscript(t *testing.T, name string) transcript {
	t.Helper()
	f, err := os.Open(filepath.Join(transcriptDir(), name))
	if os.IsNotExist(err) {
		t.Skipf("no perftest transcripts at %s (shared/reference is beside the repository)", transcriptDir())
	}
	require.NoError(t, err)
	defer f.Close()
	tr := transcript{name: name}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "# commands") {
			tr.commands = line
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		require.GreaterOrEqual(t, len(f), 3, "line %q", line)
		n, err := strconv.Atoi(f[1])
		require.NoError(t, err)
		b, err := hex.DecodeString(f[2])
		require.NoError(t, err)
		require.Len(t, b, n, "line %q", line)
		tr.segs = append(tr.segs, segment{from: f[0][0], data: b})
	}
	require.NoError(t, sc.Err())
	return tr
}

// replayCase ties a transcript to the rxectl command that speaks for each
// end of it.
type replayCase struct {
	file string
	cmd  string
	args []string
	prog string // the perftest program in the transcript's command line
	fix  func(*testing.T, []segment) []segment
}

var replayCases = []replayCase{
	{"read_64KiB.txt", "read-bw", []string{"-s", "65536"}, "ib_read_bw", nil},
	{"write_64KiB.txt", "write-bw", []string{"-s", "65536"}, "ib_write_bw", nil},
	{"send_64KiB.txt", "send-bw", []string{"-s", "65536"}, "ib_send_bw", nil},
	{"atomic_fadd.txt", "atomic-bw", []string{"-A", "FETCH_AND_ADD"}, "ib_atomic_bw", nil},
	{"read_lat_2B.txt", "read-lat", []string{"-s", "2"}, "ib_read_lat", nil},
	{"write_lat_2B.txt", "write-lat", []string{"-s", "2"}, "ib_write_lat", nil},
	{"send_lat_2B.txt", "send-lat", []string{"-s", "2"}, "ib_send_lat", nil},
	// No atomic_lat transcript: atomic_lat.c exchanges exactly what
	// read_lat.c does (one key exchange, one per QP, connect, one per QP,
	// one, then the server closes), with the same OUT (the device maximum)
	// and a non-zero R_Key, so read_lat's bytes stand for it.
	{"read_lat_2B.txt", "atomic-lat", nil, "ib_read_lat", nil},
}

// scriptPipe is a perftest end built on our own session code: what our
// code sends is replaced by the transcript's bytes (with the fields that
// must be live — QPN, PSN, R_Key, VA, GID — and our port marker taken from
// our message), and everything the end under test sends is checked
// against the transcript.
type scriptPipe struct {
	c       net.Conn
	me      byte // the transcript side this fake plays
	mu      sync.Mutex
	segs    []segment
	pos     int
	errs    []string
	nreport int // report messages seen from the end under test
}

func (p *scriptPipe) fail(format string, args ...any) {
	p.mu.Lock()
	p.errs = append(p.errs, fmt.Sprintf(format, args...))
	p.mu.Unlock()
}

func (p *scriptPipe) next(from byte, n int) (segment, error) {
	if p.pos >= len(p.segs) {
		err := fmt.Errorf("segment %d: %c sends %d bytes beyond the end of the transcript", p.pos, from, n)
		p.fail("%v", err)
		return segment{}, err
	}
	s := p.segs[p.pos]
	if s.from != from || len(s.data) != n {
		err := fmt.Errorf("segment %d: %c sends %d bytes where the transcript has %c sending %d bytes %q", p.pos, from, n, s.from, len(s.data), s.data)
		p.fail("%v", err)
		return segment{}, err
	}
	p.pos++
	return s, nil
}

func (p *scriptPipe) other() byte {
	if p.me == 'C' {
		return 'S'
	}
	return 'C'
}

func (p *scriptPipe) Send(b []byte) error {
	s, err := p.next(p.me, len(b))
	if err != nil {
		return err
	}
	out := append([]byte{}, s.data...)
	switch len(b) {
	case oob.VersionMsgSize:
		// perftest's version, then our marker and UDP port after its NUL.
		end := bytes.IndexByte(out, 0)
		copy(out[end+1:], b[len(oob.AdvertisedVersion)+1:])
	case oob.KeyMsgSize:
		mine, err := oob.ParseKeyMsg(b)
		if err != nil {
			return err
		}
		k, err := oob.ParseKeyMsg(out)
		if err != nil {
			return err
		}
		k.QPN, k.PSN, k.RKey, k.VAddr, k.GID = mine.QPN, mine.PSN, mine.RKey, mine.VAddr, mine.GID
		out = k.Marshal()
	}
	_, err = p.c.Write(out)
	return err
}

func (p *scriptPipe) Recv(b []byte) error {
	if _, err := io.ReadFull(p.c, b); err != nil {
		return err
	}
	s, err := p.next(p.other(), len(b))
	if err != nil {
		return err
	}
	p.compare(s.data, b)
	return nil
}

// compare checks bytes the end under test sent against perftest's.
func (p *scriptPipe) compare(want, got []byte) {
	at := fmt.Sprintf("segment %d (%c, %d bytes)", p.pos-1, p.other(), len(got))
	switch len(got) {
	case oob.VersionMsgSize:
		v := oob.ParseVersionMsg(got)
		if v.Value < 5.70 || v.Value >= 6.28 || v.Text != oob.AdvertisedVersion || !v.RxeCtl {
			p.fail("%s: version %q (%v): want %q, in [5.70, 6.28), with our marker", at, v.Text, v.Value, oob.AdvertisedVersion)
		}
	case oob.KeyMsgSize:
		for i := range want {
			switch {
			case want[i] == ':' || want[i] == 0:
				if got[i] != want[i] {
					p.fail("%s: byte %d is %q, perftest has %q:\n got %q\nwant %q", at, i, got[i], want[i], got, want)
					return
				}
			case !strings.ContainsRune("0123456789abcdef", rune(got[i])):
				p.fail("%s: byte %d is %q, not a lowercase hex digit: %q", at, i, got[i], got)
				return
			}
		}
		g, err1 := oob.ParseKeyMsg(got)
		w, err2 := oob.ParseKeyMsg(want)
		if err1 != nil || err2 != nil {
			p.fail("%s: %v %v", at, err1, err2)
			return
		}
		if g.LID != w.LID || g.OutReads != w.OutReads || g.SRQN != w.SRQN {
			p.fail("%s: LID/OUT/SRQN %04x/%04x/%08x, perftest %04x/%04x/%08x", at, g.LID, g.OutReads, g.SRQN, w.LID, w.OutReads, w.SRQN)
		}
		if (g.RKey == 0) != (w.RKey == 0) || g.VAddr == 0 || g.QPN == 0 {
			p.fail("%s: R_Key %#x (perftest %#x), VA %#x, QPN %#x", at, g.RKey, w.RKey, g.VAddr, g.QPN)
		}
		if !bytes.Equal(g.GID[:12], w.GID[:12]) {
			p.fail("%s: GID %x is not IPv4-mapped like perftest's %x", at, g.GID, w.GID)
		}
	case 8:
		// xchg_bw_reports: size, iterations, peak, average, message rate.
		// The client's are its results; a perftest server sends whatever
		// its report struct holds (uninitialised), so nothing to compare.
		i := p.nreport % 5
		p.nreport++
		if p.other() == 'S' {
			return
		}
		if i < 2 {
			if !bytes.Equal(got, want) {
				p.fail("%s: report value %d is %x, perftest %x", at, i, got, want)
			}
			return
		}
		f := math.Float64frombits(binary.BigEndian.Uint64(got))
		if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || i > 2 && f == 0 {
			p.fail("%s: report double %d is %v", at, i, f)
		}
	default:
		if !bytes.Equal(got, want) {
			p.fail("%s: %q, perftest sent %q", at, got, want)
		}
	}
}

// finish plays the end of the transcript: after the last key exchange
// only "done\0" messages may follow (perftest 4.5's ctx_close_connection
// writes one and closes). The atomic transcript shows the server's twice:
// one write() can only be one message, so the second is the capture
// seeing a retransmission; the end under test must send exactly one.
func (p *scriptPipe) Finish(done bool) error {
	defer p.c.Close()
	p.c.SetDeadline(time.Now().Add(10 * time.Second))
	var mine, theirs []byte
	for _, s := range p.segs[p.pos:] {
		if !bytes.Equal(s.data, []byte("done\x00")) {
			p.fail("after the last exchange the transcript has %c %q", s.from, s.data)
		}
		if s.from == p.me {
			mine = append(mine, s.data...)
		} else {
			theirs = []byte("done\x00")
		}
	}
	p.pos = len(p.segs)
	if done != (len(mine) > 0) {
		p.fail("finish(done=%v) but the transcript has %q from us", done, mine)
	}
	if len(mine) > 0 {
		p.c.Write(mine)
	}
	p.c.(*net.TCPConn).CloseWrite()
	rest, err := io.ReadAll(p.c)
	if err != nil {
		p.fail("reading the end: %v", err)
	}
	if !bytes.Equal(rest, theirs) {
		p.fail("the end under test closed with %q, perftest with %q", rest, theirs)
	}
	return nil
}

func (p *scriptPipe) Close() error { return p.c.Close() }

// TestReplayPerftest runs each transcript against our client (the fake
// plays perftest's server) and against our server (the fake plays the
// client), with real RoCE traffic between 127.0.0.1 and 127.0.0.2.
func TestReplayPerftest(t *testing.T) {
	for _, rc := range replayCases {
		for _, sut := range []string{"client", "server"} {
			t.Run(rc.cmd+"/"+strings.TrimSuffix(rc.file, ".txt")+"/"+sut, func(t *testing.T) {
				t.Parallel()
				tr := loadTranscript(t, rc.file)
				require.Contains(t, tr.commands, rc.prog+" ")
				segs := tr.segs
				if rc.fix != nil {
					segs = rc.fix(t, segs)
				}
				runReplay(t, rc, segs, sut == "client")
			})
		}
	}
}

func runReplay(t *testing.T, rc replayCase, segs []segment, sutClient bool) {
	var tst Test
	for _, pt := range Tests {
		if pt.cmd == rc.cmd {
			tst = pt
		}
	}
	args := append([]string{"-n", "20", "-m", "1024", "--udp-port", "0"}, rc.args...)
	sutOpts, err := parsePerftest(tst, append(args, "--bind", "127.0.0.2"))
	require.NoError(t, err)
	fakeOpts, err := parsePerftest(tst, append(args, "--bind", "127.0.0.1"))
	require.NoError(t, err)
	fake := &scriptPipe{segs: segs, me: 'S'}
	if !sutClient {
		fake.me = 'C'
	}
	fakeOpts.hooks.pipe = func(c net.Conn) oob.Pipe { fake.c = c; return fake }

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	srvOpts, cliOpts := fakeOpts, sutOpts
	if !sutClient {
		srvOpts, cliOpts = sutOpts, fakeOpts
	}
	cliOpts.host, cliOpts.oobPort = "127.0.0.1", port
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var srvOut, cliOut bytes.Buffer
	srvErr := make(chan error, 1)
	go func() { srvErr <- runServer(ctx, tst, srvOpts, &srvOut, ln) }()
	cerr := runClient(ctx, tst, cliOpts, &cliOut)
	serr := <-srvErr
	fake.mu.Lock()
	errs := fake.errs
	fake.mu.Unlock()
	require.Empty(t, errs, "mismatches against %s", rc.file)
	require.NoError(t, cerr, "client")
	require.NoError(t, serr, "server")
	require.Equal(t, len(segs), fake.pos, "the transcript was not played to its end")

	sutOut := cliOut.String()
	if !sutClient {
		sutOut = srvOut.String()
	}
	require.Contains(t, sutOut, " Mtu             : 1024[B]\n")
	// The header's outstanding reads are the OUT of perftest's key
	// messages (both ends' alike in the transcripts: the device's 128 in
	// READ and atomic tests, 1 in the others), printed in READ and atomic
	// tests only, the max inline data in the others (ctx_print_test_info).
	var out uint16
	for _, s := range segs {
		if len(s.data) == oob.KeyMsgSize {
			k, err := oob.ParseKeyMsg(s.data)
			require.NoError(t, err)
			out = k.OutReads
			break
		}
	}
	if tst.verb == verbRead || tst.verb == verbAtomic {
		require.Contains(t, sutOut, fmt.Sprintf("\n Outstand reads  : %d\n", out))
		require.NotContains(t, sutOut, "Max inline data")
	} else {
		require.Equal(t, uint16(1), out, "perftest's OUT in a WRITE or SEND test")
		require.Contains(t, sutOut, "\n Max inline data : ")
		require.NotContains(t, sutOut, "Outstand reads")
	}
	if !sutClient && !tst.lat && tst.verb != verbSend {
		// Our server prints the report real perftest's client sent.
		var vals []uint64
		for _, s := range segs {
			if s.from == 'C' && len(s.data) == 8 {
				vals = append(vals, binary.BigEndian.Uint64(s.data))
			}
		}
		require.Len(t, vals, 5)
		rep := report.BW{Size: vals[0], Iters: vals[1], Peak: math.Float64frombits(vals[2]),
			Avg: math.Float64frombits(vals[3]), MsgRate: math.Float64frombits(vals[4])}
		require.Contains(t, sutOut, "\n"+report.BWRow(rep, false))
	}
}
