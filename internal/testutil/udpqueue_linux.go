package testutil

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// UDPQueue is what the kernel holds for one UDP socket, as
// /proc/net/udp (udp6 for IPv6) lists it in the network namespace of the
// calling thread (/proc/thread-self/net, not /proc/self/net: that is the
// main thread's, which a test that joined another namespace from a
// locked goroutine, internal/netns, may have left there).
type UDPQueue struct {
	// Bytes is the rx_queue column: the memory (skb truesize) of the
	// datagrams queued for reading, less what the socket has read and
	// not yet released (udp_rqueue_get). Datagrams the kernel has not
	// queued yet are not in it; no read, no rise.
	Bytes int
	// Drops is the drops column (sk_drops): datagrams the socket
	// dropped, for a full receive buffer among other reasons; the count
	// SO_RXQ_OVFL reports.
	Drops int
}

// ReadUDPQueue returns the queue of the UDP socket bound to local (an
// IPv4 address for an IPv4 socket, else IPv6; the unspecified address
// for a wildcard bind). Sockets that share local (SO_REUSEPORT) cannot be
// told apart by it: ReadUDPQueue then fails, and ReadUDPQueueOf, given
// the socket, reads its own queue.
func ReadUDPQueue(local netip.AddrPort) (UDPQueue, error) {
	file, want := "/proc/thread-self/net/udp6", procAddr(local)
	if local.Addr().Is4() {
		file = "/proc/thread-self/net/udp"
	}
	var found []udpSocket
	for range listingReads {
		socks, err := readSockets(file)
		if err != nil {
			return UDPQueue{}, err
		}
		found = found[:0]
		for _, s := range socks {
			if s.local == want {
				found = append(found, s)
			}
		}
		if len(found) > 0 {
			break
		}
	}
	switch len(found) {
	case 0:
		return UDPQueue{}, fmt.Errorf("%s: no UDP socket bound to %v", file, local)
	case 1:
		return found[0].queue, nil
	}
	inodes := make([]string, len(found))
	for i, s := range found {
		inodes[i] = s.inode
	}
	return UDPQueue{}, fmt.Errorf("%s: %d UDP sockets bound to %v (inodes %s; SO_REUSEPORT): ReadUDPQueueOf reads one by its socket",
		file, len(found), local, strings.Join(inodes, ", "))
}

// ReadUDPQueueOf returns the queue of the UDP socket rc controls, found in
// /proc/net/udp or udp6 by its inode: the one the link of its descriptor
// in /proc/self/fd names ("socket:[INODE]"), so sockets that share an
// address (SO_REUSEPORT) are told apart.
func ReadUDPQueueOf(rc syscall.RawConn) (UDPQueue, error) {
	var link string
	var lerr error
	if err := rc.Control(func(fd uintptr) {
		link, lerr = os.Readlink("/proc/self/fd/" + strconv.FormatUint(uint64(fd), 10))
	}); err != nil {
		return UDPQueue{}, err
	}
	if lerr != nil {
		return UDPQueue{}, lerr
	}
	inode, ok := strings.CutPrefix(link, "socket:[")
	if inode, ok = strings.CutSuffix(inode, "]"); !ok || inode == "" {
		return UDPQueue{}, fmt.Errorf("descriptor link %q: not a socket", link)
	}
	// The socket exists (rc holds it): a listing without it is one a
	// concurrent close skipped it in (listingReads).
	for range listingReads {
		for _, file := range []string{"/proc/thread-self/net/udp", "/proc/thread-self/net/udp6"} {
			socks, err := readSockets(file)
			if err != nil {
				return UDPQueue{}, err
			}
			for _, s := range socks {
				if s.inode == inode {
					return s.queue, nil
				}
			}
		}
	}
	return UDPQueue{}, fmt.Errorf("no UDP socket of inode %s in /proc/thread-self/net/udp or udp6 (%d reads)", inode, listingReads)
}

// listingReads is how many times ReadUDPQueue and ReadUDPQueueOf read the
// sockets' listing before they report a socket missing. The kernel writes
// /proc/net/udp a page per read(2) and starts each read by walking the
// hash table again to the line it stopped at (udp_seq_start, udp_get_idx):
// a socket closed meanwhile ahead of that line shifts the rest, and the
// line after it is skipped, so a socket that exists can be missing from
// one reading while other tests (or other packages' test processes)
// close sockets. A line shown twice the same way is dropped
// (readUDPSockets keeps one line per inode).
const listingReads = 5

// readSockets is readUDPSockets; tests replace it.
var readSockets = readUDPSockets

// udpSocket is one line of /proc/net/udp or udp6.
type udpSocket struct {
	local string // local_address as procAddr writes it
	inode string // the inode column, in decimal
	queue UDPQueue
}

// readUDPSockets reads the sockets file lists (udp4_format_sock,
// udp6_seq_show), one line per inode.
func readUDPSockets(file string) ([]udpSocket, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var socks []udpSocket
	seen := make(map[string]bool)
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Scan() // the header line
	for sc.Scan() {
		// sl local rem st tx_queue:rx_queue tr:when retrnsmt uid timeout inode ref pointer drops
		f := strings.Fields(sc.Text())
		if len(f) < 13 {
			return nil, fmt.Errorf("%s: line %q: %d fields, want 13", file, sc.Text(), len(f))
		}
		_, rq, ok := strings.Cut(f[4], ":")
		if !ok {
			return nil, fmt.Errorf("%s: queue field %q", file, f[4])
		}
		n, err := strconv.ParseUint(rq, 16, 32)
		if err != nil {
			return nil, fmt.Errorf("%s: rx_queue %q: %w", file, rq, err)
		}
		drops, err := strconv.ParseUint(f[len(f)-1], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%s: drops %q: %w", file, f[len(f)-1], err)
		}
		if f[9] != "0" { // a socket without a file (closing) lists inode 0
			if seen[f[9]] {
				continue // listed twice: see listingReads
			}
			seen[f[9]] = true
		}
		socks = append(socks, udpSocket{local: f[1], inode: f[9], queue: UDPQueue{Bytes: int(n), Drops: int(drops)}})
	}
	return socks, sc.Err()
}

// procAddr writes a as /proc/net/udp and udp6 write a local address: the
// address's 32-bit words in hexadecimal as the host stores them
// (udp4_format_sock, udp6_seq_show), a colon and the port in hexadecimal.
func procAddr(a netip.AddrPort) string {
	var ip []byte
	if a.Addr().Is4() {
		b := a.Addr().As4()
		ip = b[:]
	} else {
		b := a.Addr().As16()
		ip = b[:]
	}
	var s strings.Builder
	for i := 0; i < len(ip); i += 4 {
		fmt.Fprintf(&s, "%08X", binary.NativeEndian.Uint32(ip[i:i+4]))
	}
	fmt.Fprintf(&s, ":%04X", a.Port())
	return s.String()
}

// SendQueued calls send(i) for each i in [0, n), each sending one
// datagram to the UDP socket bound to to (in the calling goroutine's
// network namespace: the caller is not locked to a thread of another), and
// after each waits until that socket has queued it: until its queued
// bytes (UDPQueue.Bytes) rise. A datagram sent on loopback is queued by
// the softirq that delivers it, which may run after the send returns (on
// another processor with RPS, in ksoftirqd under load), so a test that
// reads without waiting (a non-blocking read) right after a send waits
// here first. Nothing may read the socket meanwhile, nor send to it. A
// drop the socket counts while it waits (UDPQueue.Drops rises: its
// receive buffer is full, or another reason the kernel counts there)
// fails the test at once, naming the drop; a datagram neither queued nor
// counted dropped fails it after Bound().
func SendQueued(t testing.TB, to netip.AddrPort, n int, send func(i int)) {
	t.Helper()
	sendQueued(t, to.String(), func() (UDPQueue, error) { return ReadUDPQueue(to) }, n, send)
}

// SendQueuedOf is SendQueued for the socket rc controls, found by its
// inode (ReadUDPQueueOf): for a socket that shares its address with
// others (SO_REUSEPORT, or several sockets of one multicast group).
func SendQueuedOf(t testing.TB, rc syscall.RawConn, n int, send func(i int)) {
	t.Helper()
	sendQueued(t, "the socket", func() (UDPQueue, error) { return ReadUDPQueueOf(rc) }, n, send)
}

// sendQueued is SendQueued with the queue read by read, the socket named
// name in messages.
func sendQueued(t testing.TB, name string, read func() (UDPQueue, error), n int, send func(i int)) {
	t.Helper()
	q := func() UDPQueue {
		t.Helper()
		q, err := read()
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	for i := range n {
		before := q()
		send(i)
		bound := Bound()
		deadline := time.Now().Add(bound)
		for {
			now := q()
			if now.Drops > before.Drops {
				t.Fatalf("datagram %d of %d dropped at %s (its drops rose from %d to %d)", i, n, name, before.Drops, now.Drops)
			}
			if now.Bytes > before.Bytes {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("datagram %d of %d not queued at %s within %v", i, n, name, bound)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
}
