package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/gorxe/gorxe/packet"
)

// stdin is what "rxectl dump -" reads; tests replace it.
var stdin io.Reader = os.Stdin

// dumpOptions are the flags of rxectl dump.
type dumpOptions struct {
	json    bool
	verbose bool
	nano    bool
	strict  bool
	time    timeMode
	ports   ports
}

// dumpFlags defines the flags of rxectl dump on a new FlagSet filling o.
func dumpFlags(o *dumpOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("dump", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by runDump
	o.ports = ports{packet.UDPPort}
	fs.BoolVar(&o.json, "json", false, "print one JSON object per line instead of text")
	fs.BoolVar(&o.verbose, "v", false, "print every header field and a hex dump of the RoCE packet")
	fs.BoolVar(&o.nano, "nano", false, "print timestamps with nanosecond digits (default microseconds)")
	fs.BoolVar(&o.strict, "strict", false, "exit with status 1 if any packet has a bad ICRC or is malformed")
	fs.Func("time", "print timestamps as `mode`: rel (seconds since the first frame, the default), abs (UTC date and time) or epoch (seconds since 1970)", func(s string) error {
		m, ok := parseTimeMode(s)
		if !ok {
			return errors.New("want rel, abs or epoch")
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
	return fs
}

// dumpUsage writes the help of rxectl dump.
func dumpUsage(w io.Writer) {
	var o dumpOptions
	fs := dumpFlags(&o)
	fmt.Fprint(w, `usage: rxectl dump [flags] FILE

Dump decodes the RoCEv2 packets of a capture file: classic pcap or pcapng,
either of them gzip-compressed ("-" reads standard input). Link types:
Ethernet (with 802.1Q/QinQ tags), Linux cooked SLL and SLL2, raw IP, BSD
loopback. A frame is RoCEv2 when it is UDP to destination port 4791 (or a
--port); other frames are skipped. Flags may come before or after FILE.

Each packet gives one line: frame number (counting every frame of the file,
as Wireshark does), time (by default in seconds since the first frame),
source → destination, opcode, destination QP, PSN, the BTH flags that are set
(SE M AckReq FECN BECN), P_Key when not 0xffff, the extension headers, the
payload length and the ICRC verdict. A UDP datagram to a RoCEv2 port that
does not parse is reported as MALFORMED with the reason. A summary (frames,
RoCEv2 packets including malformed ones, bad ICRCs, malformed) goes to
standard error.

With --json, each line is an object with the keys frame, src, dst, opcode,
opcode_num, se, migreq, pad, tver, pkey, fecn, becn, dqpn, ackreq, psn, one
key per extension header (rdeth, deth {qkey, src_qp}, feth, reth {va, rkey,
dma_len}, atomiceth {va, rkey, swap_add, compare}, aeth {syndrome, msn},
atomicacketh {orig}, immdt, ieth), payload_len (without pad), icrc (the
wire value read little-endian) and icrc_ok; a malformed packet has frame,
src, dst and error. Integers are unsigned decimal JSON numbers, up to 2^64-1.

Exit status: 0 when the file was read to its end, even if packets have a bad
ICRC or are malformed (see --strict); 1 when the file cannot be opened, is not
a capture, has an unsupported link type or ends in the middle of a record
(the frames before are still printed); 2 for a usage error.

Flags:
`)
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// dumpStats counts what rxectl dump saw.
type dumpStats struct {
	frames, roce, badICRC, malformed int
}

// runDump implements "rxectl dump [flags] FILE".
func runDump(args []string, stdout, stderr io.Writer) int {
	var o dumpOptions
	fs := dumpFlags(&o)
	pos, err := parseIntermixed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		dumpUsage(stdout)
		return exitOK
	}
	if err == nil && len(pos) != 1 {
		err = fmt.Errorf("want exactly one FILE, got %d arguments", len(pos))
	}
	if err == nil && o.json && o.verbose {
		err = errors.New("-v and --json cannot be combined")
	}
	if err != nil {
		fmt.Fprintf(stderr, "rxectl dump: %v\nusage: rxectl dump [flags] FILE (see rxectl help dump)\n", err)
		return exitUsage
	}
	name := pos[0]
	var in io.Reader
	if name == "-" {
		in, name = stdin, "standard input"
	} else {
		fh, err := os.Open(name)
		if err != nil {
			fmt.Fprintf(stderr, "rxectl dump: %v\n", err)
			return exitFail
		}
		defer fh.Close()
		if st, err := fh.Stat(); err == nil && st.IsDir() {
			fmt.Fprintf(stderr, "rxectl dump: %s: is a directory, not a capture\n", name)
			return exitFail
		}
		in = fh
	}
	return dump(in, name, &o, stdout, stderr, pos[0] == "-")
}

// parseIntermixed parses fs's flags wherever they appear in args and
// returns the other arguments in order; everything after "--" is an
// argument.
func parseIntermixed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// dump decodes the capture in r (named name in messages) and writes the
// report to stdout and the summary to stderr. It returns the exit status.
// With live set (standard input, maybe a running tcpdump -w -) every
// frame's output is flushed at once.
func dump(r io.Reader, name string, o *dumpOptions, stdout, stderr io.Writer, live bool) int {
	c, err := openCapture(r)
	if err != nil {
		fmt.Fprintf(stderr, "rxectl dump: %s: %v\n", name, err)
		return exitFail
	}
	if c.pcap != nil && !supportedLinkType(c.linkType) {
		fmt.Fprintf(stderr, "rxectl dump: %s: unsupported %s; rxectl decodes Ethernet, Linux SLL/SLL2, raw IP and loopback captures\n", name, linkTypeName(c.linkType))
		return exitFail
	}
	w := bufio.NewWriterSize(stdout, 64<<10)
	var (
		st      dumpStats
		first   time.Time
		buf     []byte
		tsBuf   []byte
		warned  map[linkType]bool
		readErr error
	)
	for {
		rec, err := c.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			readErr = err
			break
		}
		st.frames++
		if st.frames == 1 {
			first = rec.ts
		}
		if !supportedLinkType(rec.linkType) { // pcapng: per interface
			if !warned[rec.linkType] {
				if warned == nil {
					warned = map[linkType]bool{}
				}
				warned[rec.linkType] = true
				fmt.Fprintf(stderr, "rxectl dump: %s: skipping frames of unsupported %s (first: frame %d)\n", name, linkTypeName(rec.linkType), st.frames)
			}
			continue
		}
		f := frame{num: st.frames, capLen: rec.capLen, origLen: rec.origLen}
		decodeFrame(&f, rec.data, rec.linkType, o.ports)
		switch f.kind {
		case kindOther:
			continue
		case kindMalformed:
			st.roce++
			st.malformed++
		case kindRoCE:
			st.roce++
			if !f.icrcOK {
				st.badICRC++
			}
		}
		if o.json {
			buf = appendJSON(buf[:0], &f)
		} else {
			tsBuf = appendTime(tsBuf[:0], rec.ts, first, o.time, o.nano)
			buf = appendText(buf[:0], &f, tsBuf, o.verbose)
		}
		w.Write(buf)
		if live {
			w.Flush()
		}
	}
	status := exitOK
	if err := w.Flush(); err != nil {
		fmt.Fprintf(stderr, "rxectl dump: writing output: %v\n", err)
		status = exitFail
	}
	if readErr != nil {
		if errors.Is(readErr, errTruncated) {
			fmt.Fprintf(stderr, "rxectl dump: %s: %v after frame %d\n", name, readErr, st.frames)
		} else {
			fmt.Fprintf(stderr, "rxectl dump: %s: reading frame %d: %v\n", name, st.frames+1, readErr)
		}
		status = exitFail
	}
	fmt.Fprintf(stderr, "rxectl dump: %d frames, %d RoCEv2 packets, %d bad ICRC, %d malformed\n", st.frames, st.roce, st.badICRC, st.malformed)
	if status == exitOK && o.strict && st.badICRC+st.malformed > 0 {
		status = exitFail
	}
	return status
}
