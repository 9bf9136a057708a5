package rxe

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/netdev"
	"github.com/stretchr/testify/require"
)

// helperEnv, set to "1", makes TestHelperProcess run as the server half of
// TestTwoProcesses instead of skipping.
const helperEnv = "GORXE_RXE_HELPER_PROCESS"

// Sizes and regions of the two-process test. The server's buffer holds the
// WRITE target at 0, the READ source at procReadOff and the SEND receive
// buffer at procRecvOff.
const (
	procBufSize  = 4 << 20
	procWriteLen = 1<<20 + 3 // not a multiple of the MTU
	procReadOff  = 2 << 20
	procReadLen  = 1<<20 + 5
	procRecvOff  = 3<<20 + 512
	procSendLen  = 200_001
	procRecvLen  = 256 << 10
	procRecvID   = 77
)

// procHello is the server's first line: its connection information and
// its memory region.
type procHello struct {
	Info ConnInfo `json:"info"`
	Addr uint64   `json:"addr"`
	RKey uint32   `json:"rkey"`
	Len  int      `json:"len"`
}

// procCmd is a command from the parent, one JSON object per line.
type procCmd struct {
	Cmd  string    `json:"cmd"` // connect, fill, sum, recv, exit
	Info *ConnInfo `json:"info,omitempty"`
	Off  int       `json:"off,omitempty"`
	Len  int       `json:"len,omitempty"`
	Seed uint64    `json:"seed,omitempty"`
}

// procReply answers every command, one JSON object per line.
type procReply struct {
	Err     string `json:"err,omitempty"`
	Sum     string `json:"sum,omitempty"` // SHA-256 of the region, hex
	Status  string `json:"status,omitempty"`
	ByteLen uint32 `json:"byte_len,omitempty"`
	ID      uint64 `json:"id,omitempty"`
}

func procSum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// TestTwoProcesses runs RC traffic between two OS processes: this test
// binary re-executed as a server (TestHelperProcess) on 127.0.0.2, and this
// process on 127.0.0.1, each with its own device and UDP socket on an
// ephemeral port. They exchange ConnInfo over the child's stdin and stdout,
// then the parent runs an RDMA WRITE, an RDMA READ and a SEND; the child
// reports SHA-256 sums of its memory, and the data is checked byte for
// byte. The child is killed if anything fails or takes too long. It is one
// scripted session, kept in one function so that it reads in the order
// the two processes act (helperServe is the child's half, in the same
// order).
func TestTwoProcesses(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skipf("cannot re-execute the test binary: %v", err)
	}
	// The session, the child's own deadline and each wait for its answer
	// are bounded by the tests' shared bound.
	bound := testutil.Bound()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-test.run=^TestHelperProcess$", "-test.timeout="+bound.String())
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := false
	t.Cleanup(func() {
		if !exited {
			cancel() // kills the child
			_ = cmd.Wait()
		}
		if t.Failed() && stderr.Len() > 0 {
			t.Logf("server stderr:\n%s", stderr.String())
		}
	})

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			// The test framework may print lines of its own: only JSON
			// objects belong to the exchange.
			if l := sc.Text(); strings.HasPrefix(l, "{") {
				select {
				case lines <- l:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	read := func(v any) {
		t.Helper()
		limit := testutil.Bound()
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the server closed its stdout")
			require.NoError(t, json.Unmarshal([]byte(l), v), "server line %q", l)
		case <-time.After(limit):
			t.Fatalf("no answer from the server in %v", limit)
		}
	}
	enc := json.NewEncoder(stdin)
	call := func(c procCmd) procReply {
		t.Helper()
		require.NoError(t, enc.Encode(c))
		var r procReply
		read(&r)
		require.Empty(t, r.Err, "server error for %s", c.Cmd)
		return r
	}

	var hello procHello
	read(&hello)
	require.True(t, hello.Info.GID.Unmap().Is4(), "server GID %v", hello.Info.GID)
	require.NotZero(t, hello.Info.UDPPort)
	require.Equal(t, procBufSize, hello.Len)

	// Our side: 127.0.0.1, ephemeral port.
	conn, err := netdev.ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"), netdev.Options{BlockingWrite: true})
	require.NoError(t, err)
	dev, err := Open(conn, Options{Name: "rxe-parent", OwnConn: true})
	require.NoError(t, err)
	defer dev.Close()
	me := newEnd(t, dev, procBufSize)
	local := me.qp.Info(0x123456)
	require.NoError(t, me.qp.Connect(local, hello.Info, ConnectOptions{}))
	call(procCmd{Cmd: "connect", Info: &local}) // answered once the server's QP is in RTS

	post := func(wr SendWR) {
		t.Helper()
		_, err := me.qp.PostSend(wr)
		require.NoError(t, err)
		wc := waitWC(t, me.cq)
		require.Equal(t, WCSuccess, wc.Status, "%v", wr.Opcode)
		require.Equal(t, wr.ID, wc.ID)
		require.Equal(t, verbsWCOpcode(wr.Opcode), wc.Opcode)
	}
	local1 := func(off, n int) []byte {
		me.qp.Query() // order with our device's goroutines (see syncMem)
		return me.buf[off : off+n]
	}

	// RDMA WRITE: our bytes land in the server's memory.
	fill(me.buf[:procWriteLen], 1)
	post(SendWR{ID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, SGList: []SGE{me.mr.SGE(0, procWriteLen)},
		RemoteAddr: hello.Addr, RKey: hello.RKey})
	r := call(procCmd{Cmd: "sum", Off: 0, Len: procWriteLen})
	require.Equal(t, procSum(local1(0, procWriteLen)), r.Sum, "WRITE: the server's memory differs")

	// RDMA READ: the server's bytes land in ours.
	r = call(procCmd{Cmd: "fill", Off: procReadOff, Len: procReadLen, Seed: 2})
	want := make([]byte, procReadLen)
	fill(want, 2)
	require.Equal(t, procSum(want), r.Sum, "the server filled its memory differently")
	post(SendWR{ID: 2, Opcode: WRRDMARead, Flags: SendSignaled, SGList: []SGE{me.mr.SGE(procReadOff, procReadLen)},
		RemoteAddr: hello.Addr + procReadOff, RKey: hello.RKey})
	require.True(t, bytes.Equal(want, local1(procReadOff, procReadLen)), "READ: our memory differs from the server's")

	// SEND: into the receive WQE the server posted before answering connect.
	fill(me.buf[procRecvOff:procRecvOff+procSendLen], 3)
	post(SendWR{ID: 3, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{me.mr.SGE(procRecvOff, procSendLen)}})
	r = call(procCmd{Cmd: "recv", Off: procRecvOff, Len: procSendLen})
	require.Equal(t, WCSuccess.String(), r.Status)
	require.Equal(t, uint64(procRecvID), r.ID)
	require.Equal(t, uint32(procSendLen), r.ByteLen)
	require.Equal(t, procSum(local1(procRecvOff, procSendLen)), r.Sum, "SEND: the server received other bytes")

	call(procCmd{Cmd: "exit"})
	require.NoError(t, stdin.Close())
	err = cmd.Wait()
	exited = true
	require.NoError(t, err, "server exit")
}

// TestHelperProcess is the server half of TestTwoProcesses; it skips
// unless GORXE_RXE_HELPER_PROCESS=1. It prints its procHello as one JSON
// line on stdout, then answers commands read from stdin, one JSON line
// each, and exits with status 0 after "exit" (or 1 on an error, 2 after
// testutil.Bound(), within its -test.timeout, or when stdin closes early).
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("the server half of TestTwoProcesses")
	}
	time.AfterFunc(testutil.Bound(), func() {
		fmt.Fprintln(os.Stderr, "helper: timed out")
		os.Exit(2)
	})
	if err := helperServe(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// helperServe is the child's half of TestTwoProcesses: it opens a device,
// exchanges ConnInfo over in and out, then serves the parent's steps one
// by one, in the parent's order (hence its length).
func helperServe(in io.Reader, out io.Writer) error {
	conn, err := netdev.ListenUDP(netip.MustParseAddrPort("127.0.0.2:0"), netdev.Options{BlockingWrite: true})
	if err != nil {
		return err
	}
	dev, err := Open(conn, Options{Name: "rxe-child", OwnConn: true})
	if err != nil {
		conn.Close()
		return err
	}
	defer dev.Close()
	pd, err := dev.AllocPD()
	if err != nil {
		return err
	}
	cq, err := dev.CreateCQ(64, -1)
	if err != nil {
		return err
	}
	qp, err := pd.CreateQP(QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return err
	}
	buf := make([]byte, procBufSize)
	mr, err := pd.RegMR(buf, AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(out)
	local := qp.Info(0xABCDE)
	if err := enc.Encode(procHello{Info: local, Addr: mr.Addr(), RKey: mr.RKey(), Len: len(buf)}); err != nil {
		return err
	}
	// mem returns a region of buf once the device's goroutines, which
	// place remote data while holding the QP's mutex, are ordered before
	// us (Query takes it).
	mem := func(off, n int) ([]byte, error) {
		if off < 0 || n < 0 || off+n > len(buf) {
			return nil, fmt.Errorf("region [%d, %d) outside the buffer", off, off+n)
		}
		qp.Query()
		return buf[off : off+n], nil
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var c procCmd
		var r procReply
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return err
		}
		switch c.Cmd {
		case "connect":
			if c.Info == nil {
				return errors.New("connect without info")
			}
			if err := qp.Connect(local, *c.Info, ConnectOptions{}); err != nil {
				return err
			}
			// The receive WQE for the SEND goes in before the answer, so
			// before the peer can send.
			if _, err := qp.PostRecv(RecvWR{ID: procRecvID, SGList: []SGE{mr.SGE(procRecvOff, procRecvLen)}}); err != nil {
				return err
			}
		case "fill":
			b, err := mem(c.Off, c.Len)
			if err != nil {
				return err
			}
			fill(b, c.Seed)
			b, _ = mem(c.Off, c.Len)
			r.Sum = procSum(b)
		case "sum":
			b, err := mem(c.Off, c.Len)
			if err != nil {
				return err
			}
			r.Sum = procSum(b)
		case "recv":
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Bound())
			wc := make([]WC, 1)
			_, err := cq.Wait(ctx, wc)
			cancel()
			if err != nil {
				r.Err = "waiting for the receive completion: " + err.Error()
				break
			}
			r.Status, r.ByteLen, r.ID = wc[0].Status.String(), wc[0].ByteLen, wc[0].ID
			b, err := mem(c.Off, int(wc[0].ByteLen))
			if err != nil {
				return err
			}
			r.Sum = procSum(b)
		case "exit":
			if err := enc.Encode(r); err != nil {
				return err
			}
			return nil
		default:
			r.Err = fmt.Sprintf("unknown command %q", c.Cmd)
		}
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errors.New("stdin closed before exit")
}
