// Package dump is rxectl dump: it reads pcap and pcapng captures (Open,
// Capture), decodes their RoCEv2 frames (DecodeFrame, Reader) and prints
// them as text or JSON lines (AppendText, AppendJSON, Run).
package dump

import (
	"bufio"
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/packet"
)

// options are the flags of rxectl dump.
type options struct {
	json    bool
	verbose bool
	nano    bool
	strict  bool
	time    timeMode
	ports   Ports
	an      analysis // --flows, --ladder (analyse.go)
}

// flags defines the flags of rxectl dump on a new FlagSet filling o.
func flags(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("dump", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by Run
	o.ports = Ports{packet.UDPPort}
	fs.BoolVar(&o.json, "json", false, "print one JSON object per line instead of text")
	fs.BoolVar(&o.verbose, "v", false, "print every header field and a hex dump of the RoCE packet")
	fs.BoolVar(&o.nano, "nano", false, "print timestamps with nanosecond digits (default microseconds)")
	fs.BoolVar(&o.strict, "strict", false, "exit with status 1 if any packet has a bad ICRC or is malformed (packets truncated by the capture are not: their ICRC was not captured)")
	fs.Func("time", "print timestamps as `mode`: rel (seconds since the first frame, the default), abs (UTC date and time) or epoch (seconds since 1970); with --ladder, T1-T2 draws that window (seconds since the first frame, or durations such as 50ms-80ms)", func(s string) error {
		m, ok := parseTimeMode(s)
		if !ok && parseWindow(s, &o.an) {
			return nil
		}
		if !ok {
			return errors.New("want rel, abs or epoch (or T1-T2 with --ladder)")
		}
		o.time = m
		return nil
	})
	fs.Func("port", "also decode UDP destination port `N` as RoCEv2 (besides 4791); may be repeated", func(s string) error {
		n, err := strconv.ParseUint(s, 10, 16)
		if err != nil || n == 0 {
			return errors.New("want a port number 1..65535")
		}
		if !o.ports.has(uint16(n)) {
			o.ports = append(o.ports, uint16(n))
		}
		return nil
	})
	analysisFlags(fs, &o.an)
	return fs
}

// Usage writes the help of rxectl dump.
func Usage(w io.Writer) {
	var o options
	fs := flags(&o)
	fmt.Fprint(w, `usage: rxectl dump [flags] FILE

Dump decodes the RoCEv2 packets of a capture file: classic pcap or pcapng,
either of them gzip-compressed ("-" reads standard input). Link types:
Ethernet (with 802.1Q/QinQ tags), Linux cooked SLL and SLL2, raw IP, BSD
loopback. A frame is RoCEv2 when it is UDP to destination port 4791 (or a
--port); other frames are skipped. Of those, UDP datagrams to another port
whose RoCE packets check (the answers to a device that receives on another
port, as with two devices on one address, or rxectl --udp-port 0 runs) are
counted: standard error says how many went from and to which ports, and
the --port that decodes them. So are the IP fragments after the first of
datagrams to a RoCEv2 port, which carry no UDP header (the first fragment
is MALFORMED). Flags may come before or after FILE.

Each packet gives one line: frame number (counting every frame of the file,
as Wireshark does), time (by default in seconds since the first frame),
source → destination, opcode, destination QP, PSN, the BTH flags that are set
(SE M AckReq FECN BECN), P_Key when not 0xffff, the extension headers, the
payload length and the ICRC verdict. A UDP datagram to a RoCEv2 port that
does not parse is reported as MALFORMED with the reason. A summary (frames,
RoCEv2 packets including malformed ones, bad ICRCs, malformed, and those
truncated by the capture when there are any) goes to standard error.

A capture taken with a snap length (tcpdump -s 128) keeps only the first
bytes of each frame; its records say how many bytes were captured and how
many were on the wire. Such a packet is decoded as far as its bytes go: the
BTH, each extension header captured whole, the MAD header of a QP1 packet,
and the payload length, which the IP and UDP length fields give. Its line
ends in "TRUNCATED by the capture (C of W bytes captured)", names any
header that was not captured, and says that the payload and ICRC were not
checked: nothing past the cut can be. A frame cut before the end of the BTH
says so and decodes nothing. These are neither malformed nor of a bad
ICRC; --strict does not fail on them, but says how many it could not
verify. A GSO/GRO datagram that the capture cut is split by lengths as far
as its bytes show them; when they show no boundary its line says that it
holds several packets, of which only the first one's headers were captured.

A UDP datagram that holds several RoCE packets back to back (a GSO buffer
captured on the sending host before the kernel segments it, or datagrams
that UDP GRO merged on the receiving host) is split where the ICRCs of its
pieces say; each piece gets a line of its own, with the datagram's frame
number and "(segment I of N in one UDP datagram: GSO/GRO)". A corrupted
piece, whose ICRC fails while others of the datagram check (over IPv4 one
past the first, which shows the IDs the pieces carry), gets a line of its
own with ICRC BAD; a datagram whose ICRCs show no split is one packet with
ICRC BAD. Wireshark does not split them: capture on the wire or run rxectl
with GSO off for it.

With --json, each line is an object with the keys frame, src, dst, opcode,
opcode_num, se, migreq, pad, tver, pkey, fecn, becn, dqpn, ackreq, psn, one
key per extension header (rdeth, deth {qkey, src_qp}, feth, reth {va, rkey,
dma_len}, atomiceth {va, rkey, swap_add, compare}, aeth {syndrome, msn},
atomicacketh {orig}, immdt, ieth), payload_len (without pad), icrc (the
wire value read little-endian) and icrc_ok, and segment and segments
for a piece of such a datagram; a malformed packet has frame,
src, dst and error. A packet truncated by the capture has, instead of icrc
and icrc_ok, truncated (true), caplen and origlen (the frame's captured and
on-the-wire lengths), captured (bytes of the RoCE packet captured) and,
for a datagram of several packets it cannot split, merged; only the
extension headers captured whole have keys. A frame cut before the end of
its BTH has frame, src, dst, truncated, caplen and origlen. Integers are
unsigned decimal JSON numbers, up to 2^64-1.

With --flows, dump prints the flow analysis instead: the packets grouped by
flow (source, destination, destination QP, and for UD the source QP), the
two directions of a connection paired; per flow the packets and bytes by
opcode, the messages seen whole (FIRST..LAST or ONLY; requests as the
responder executes them, in PSN order, and, when it sent selective-repeat
reports, the requests it held behind a hole too; a READ's responses once
every PSN of its span came, in any order, re-reads included), psn_gaps
(PSNs ahead of the next expected one: packets lost before the capture
point; not a re-read of a hole's READ responses, nor the requester going
on after it; a request that comes late, reordered, takes its PSN back from
its gap, as does a READ response that fills a hole of a READ not read
again), psn_rewinds (PSNs behind the previous packet and not late:
retransmissions, and a responder answering a re-read again), psn_late
(those that came late; UD, which never resends, is not checked for gaps,
rewinds or late packets) and the NAKs by kind; per connection the
recovery episodes with their cause as far as the capture shows it
(sequence NAK, timeout, RNR wait, implied NAK, selective resend, probe),
their first and last frame and duration, RTT samples, goodput per interval, and sentences
saying what went wrong. --json prints the same as one JSON object. A packet
truncated by the capture takes part from its headers, its payload length
from the IP and UDP lengths (a snap-length capture is analysed like the
whole one); one cut inside its headers, a cut datagram of several
packets that cannot be split, and malformed datagrams are left out, and
standard error says how many of each (with the first one's frame, and for
the first kind the snap length that keeps every header). Packets
with a bad ICRC, which a receiver drops, take no other part in the analysis
than being counted: bad_icrc per flow, with their frames (on a line of its
own for those whose addresses and QP name no flow: the corruption may have
hit those); a PSN missing from a gap that such a packet of the same flow
carried, captured after the flow's packet before the gap and before the one
that opened it, counts in psn_corrupt, and the gap is said to be corrupted
(bad ICRC, dropped by the receiver), not lost before the capture point. The
ladder does not draw them. The analysis and the ladder trust the capture's
frame order over its time stamps: a frame stamped before the frame ahead of
it is taken at that frame's time. The goodput has at most 20 intervals
however far the time stamps jump.

--ladder OUT.svg (or .png) draws one connection as a ladder diagram:
requester and responder as two lanes, each packet an arrow, losses,
retransmissions, NAKs and timeouts in colour, runs of MIDDLE packets folded.
--qp N picks the connection, --frames A-B or --time T1-T2 a window. See
docs/debugging.md.

Exit status: 0 when the file was read to its end, even if packets have a bad
ICRC or are malformed (see --strict); 1 when the file cannot be opened, is not
a capture, has an unsupported link type or ends in the middle of a record
(the frames before are still printed); 2 for a usage error.

Flags:
`)
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// stats counts what rxectl dump saw.
type stats struct {
	frames, roce, badICRC, malformed int
	// truncated counts the packets (and KindCut frames) the capture cut
	// short: neither malformed nor of a bad ICRC, but not checked.
	truncated int
}

// Run implements "rxectl dump [flags] FILE"; "-" reads stdin. It returns
// the exit status.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var o options
	fs := flags(&o)
	pos, err := cli.ParseIntermixed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		Usage(stdout)
		return cli.ExitOK
	}
	if err == nil && len(pos) != 1 {
		err = fmt.Errorf("want exactly one FILE, got %d arguments", len(pos))
	}
	if err == nil && o.json && o.verbose {
		err = errors.New("-v and --json cannot be combined")
	}
	if err == nil {
		err = o.an.check(&o)
	}
	if err != nil {
		fmt.Fprintf(stderr, "rxectl dump: %v\nusage: rxectl dump [flags] FILE (see rxectl help dump)\n", err)
		return cli.ExitUsage
	}
	name := pos[0]
	var in io.Reader
	if name == "-" {
		in, name = stdin, "standard input"
	} else {
		fh, err := os.Open(name)
		if err != nil {
			fmt.Fprintf(stderr, "rxectl dump: %v\n", err)
			return cli.ExitFail
		}
		defer fh.Close()
		if st, err := fh.Stat(); err == nil && st.IsDir() {
			fmt.Fprintf(stderr, "rxectl dump: %s: is a directory, not a capture\n", name)
			return cli.ExitFail
		}
		in = fh
	}
	if o.an.flows || o.an.ladder != "" {
		return analyse(in, name, &o, stdout, stderr)
	}
	return dump(in, name, &o, stdout, stderr, pos[0] == "-")
}

// Reader decodes the frames of a capture one after the other, skipping
// those that are not RoCEv2.
type Reader struct {
	c     *Capture
	ports Ports
	n     int       // frames read, RoCEv2 or not
	first time.Time // timestamp of frame 1
	// Unsupported, when set, is called for the first frame of each
	// unsupported link type of a pcapng file (frame is its number); such
	// frames are skipped.
	Unsupported func(lt LinkType, frame int)
	warned      map[LinkType]bool
	// seg is the frame whose further segments Next returns before it
	// reads on, and rec its record.
	seg Frame
	rec Record
	// skip counts what Next skips that standard error should name.
	skip skipped
}

// skipped counts the frames Reader.Next skips that hold RoCE it does not
// decode: UDP datagrams to another port whose RoCE packets check
// (Frame.OtherPort), and the IP fragments after the first of datagrams
// to a RoCEv2 port.
type skipped struct {
	// otherPort counts the Frame.OtherPort datagrams by source and
	// destination port.
	otherPort map[[2]uint16]int
	// firstFrags holds the datagrams whose first fragment went to a
	// RoCEv2 port, laterFrags counts the later fragments of each UDP
	// datagram: a later fragment may come before its first.
	firstFrags map[fragKey]bool
	laterFrags map[fragKey]int
}

// add counts f, a frame Reader.Next decoded, if it is one s counts.
func (s *skipped) add(f *Frame) {
	switch {
	case f.OtherPort:
		if s.otherPort == nil {
			s.otherPort = map[[2]uint16]int{}
		}
		s.otherPort[[2]uint16{f.Src.Port(), f.Dst.Port()}]++
	case f.firstFragment:
		if s.firstFrags == nil {
			s.firstFrags = map[fragKey]bool{}
		}
		s.firstFrags[f.frag] = true
	case f.laterFragment:
		if s.laterFrags == nil {
			s.laterFrags = map[fragKey]int{}
		}
		s.laterFrags[f.frag]++
	}
}

// say writes to w what s counted: how many later fragments of datagrams
// to a RoCEv2 port there were, and, for each pair of ports that
// Frame.OtherPort datagrams went from and to, how many there were and
// the --port that decodes them, in port order.
func (s *skipped) say(w io.Writer) {
	frags := 0
	for k, n := range s.laterFrags {
		if s.firstFrags[k] {
			frags += n
		}
	}
	switch {
	case frags == 1:
		fmt.Fprintln(w, "rxectl dump: 1 IP fragment after the first of a datagram to a RoCEv2 port not decoded: it carries no UDP header (the datagram's first fragment is MALFORMED)")
	case frags > 1:
		fmt.Fprintf(w, "rxectl dump: %d IP fragments after the first of datagrams to a RoCEv2 port not decoded: they carry no UDP header (the first fragment of each is MALFORMED)\n", frags)
	}
	hintPorts(w, s.otherPort)
}

// NewReader opens the capture in r (see Open) for decoding UDP datagrams
// to the given ports as RoCEv2. It fails for a classic pcap file of an
// unsupported link type.
func NewReader(r io.Reader, ports Ports) (*Reader, error) {
	c, err := Open(r)
	if err != nil {
		return nil, err
	}
	if c.pcap != nil && !c.LinkType.Supported() {
		return nil, fmt.Errorf("unsupported %s; rxectl decodes Ethernet, Linux SLL/SLL2, raw IP and loopback captures", c.LinkType.String())
	}
	return &Reader{c: c, ports: ports}, nil
}

// hintPorts writes, for each pair of ports in m (by source and
// destination port), how many UDP datagrams went from the one to the
// other that hold RoCE packets whose ICRCs check, and the --port that
// decodes them.
func hintPorts(w io.Writer, m map[[2]uint16]int) {
	pairs := slices.SortedFunc(maps.Keys(m), func(a, b [2]uint16) int {
		return cmp.Or(cmp.Compare(a[1], b[1]), cmp.Compare(a[0], b[0]))
	})
	for _, p := range pairs {
		verb := "hold"
		if m[p] == 1 {
			verb = "holds"
		}
		fmt.Fprintf(w, "rxectl dump: %s from port %d to port %d %s RoCEv2 packets (their ICRCs check), not decoded: add --port %d\n",
			count(m[p], "UDP datagram"), p[0], p[1], verb, p[1])
	}
}

// Frames is the number of frames read so far, RoCEv2 or not: the number
// of the last frame Next returned or skipped.
func (r *Reader) Frames() int { return r.n }

// First is the timestamp of the file's first frame, RoCEv2 or not (zero
// before Next has read it): the origin of relative times.
func (r *Reader) First() time.Time { return r.first }

// Next decodes the next RoCEv2 frame, or UDP datagram to a RoCEv2 port
// that is malformed or that the capture cut before its BTH (KindCut), into
// f and returns its record (valid until the next call). A datagram that holds several RoCE packets gives one frame per
// packet, all with the datagram's frame number (see Frame.Segment). It
// returns io.EOF at the clean end of the file and an error wrapping
// ErrTruncated when the file stops inside a record.
func (r *Reader) Next(f *Frame) (Record, error) {
	if r.seg.Segment > 0 && r.seg.Segment < len(r.seg.segs) {
		r.seg.setSegment(r.seg.Segment)
		*f = r.seg
		return r.rec, nil
	}
	for {
		rec, err := r.c.Next()
		if err != nil {
			return rec, err
		}
		if r.n++; r.n == 1 {
			r.first = rec.TS
		}
		if !rec.LinkType.Supported() { // pcapng: per interface
			if !r.warned[rec.LinkType] {
				if r.warned == nil {
					r.warned = map[LinkType]bool{}
				}
				r.warned[rec.LinkType] = true
				if r.Unsupported != nil {
					r.Unsupported(rec.LinkType, r.n)
				}
			}
			continue
		}
		*f = Frame{Num: r.n, CapLen: rec.CapLen, OrigLen: rec.OrigLen}
		DecodeFrame(f, rec.Data, rec.LinkType, r.ports)
		if f.Segments > 0 {
			r.seg, r.rec = *f, rec
		}
		r.skip.add(f)
		if f.Kind != KindOther {
			return rec, nil
		}
	}
}

// outBufs holds the 64 KiB output buffers of dump, for the next call.
var outBufs = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 64<<10) }}

// dump decodes the capture in r (named name in messages) and writes the
// report to stdout and the summary to stderr. It returns the exit status.
// With live set (standard input, maybe a running tcpdump -w -) every
// frame's output is flushed at once.
func dump(r io.Reader, name string, o *options, stdout, stderr io.Writer, live bool) int {
	rd, err := NewReader(r, o.ports)
	if err != nil {
		fmt.Fprintf(stderr, "rxectl dump: %s: %v\n", name, err)
		return cli.ExitFail
	}
	rd.Unsupported = func(lt LinkType, frame int) {
		fmt.Fprintf(stderr, "rxectl dump: %s: skipping frames of unsupported %s (first: frame %d)\n", name, lt.String(), frame)
	}
	w := outBufs.Get().(*bufio.Writer)
	w.Reset(stdout)
	defer func() {
		w.Reset(nil)
		outBufs.Put(w)
	}()
	var (
		st      stats
		buf     []byte
		tsBuf   []byte
		readErr error
		f       Frame
	)
	for {
		rec, err := rd.Next(&f)
		if err == io.EOF {
			break
		}
		if err != nil {
			readErr = err
			break
		}
		st.roce++
		switch {
		case f.Kind == KindMalformed:
			st.malformed++
		case f.Kind == KindCut || f.Truncated:
			st.truncated++
		case !f.ICRCOK:
			st.badICRC++
		}
		if o.json {
			buf = AppendJSON(buf[:0], &f)
		} else {
			tsBuf = appendTime(tsBuf[:0], rec.TS, rd.First(), o.time, o.nano)
			buf = AppendText(buf[:0], &f, tsBuf, o.verbose)
		}
		w.Write(buf)
		if live {
			w.Flush()
		}
	}
	st.frames = rd.Frames()
	status := cli.ExitOK
	if err := w.Flush(); err != nil {
		fmt.Fprintf(stderr, "rxectl dump: writing output: %v\n", err)
		status = cli.ExitFail
	}
	if readErr != nil {
		if errors.Is(readErr, ErrTruncated) {
			fmt.Fprintf(stderr, "rxectl dump: %s: %v after frame %d\n", name, readErr, st.frames)
		} else {
			fmt.Fprintf(stderr, "rxectl dump: %s: reading frame %d: %v\n", name, st.frames+1, readErr)
		}
		status = cli.ExitFail
	}
	fmt.Fprintf(stderr, "rxectl dump: %s, %s, %d bad ICRC, %d malformed", count(st.frames, "frame"), count(st.roce, "RoCEv2 packet"), st.badICRC, st.malformed)
	if st.truncated > 0 {
		fmt.Fprintf(stderr, ", %d truncated by the capture (snap length)", st.truncated)
	}
	fmt.Fprintln(stderr)
	rd.skip.say(stderr)
	if o.strict && st.truncated > 0 {
		// They fail no check: their ICRC and payload were not captured.
		fmt.Fprintf(stderr, "rxectl dump: --strict: the ICRC and payload of %s truncated by the capture could not be verified (not counted as failures)\n", count(st.truncated, "packet"))
	}
	if status == cli.ExitOK && o.strict && st.badICRC+st.malformed > 0 {
		status = cli.ExitFail
	}
	return status
}

// count writes n and noun, with an s for any count but 1: "1 frame",
// "0 frames", "15 RoCEv2 packets".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
