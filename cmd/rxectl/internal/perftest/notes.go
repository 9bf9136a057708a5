package perftest

import (
	"bytes"
	"fmt"
	"io"
	"sync"
)

// capWarner says a warning once per run, on w: the run's two devices
// (--loopback) may both find their socket buffers capped.
type capWarner struct {
	once sync.Once
	w    io.Writer
}

// say writes line (and a newline) once per run: on c's writer, or, for a
// session outside Test.Run (c nil), on fallback.
func (c *capWarner) say(fallback io.Writer, line string) {
	if c == nil {
		fmt.Fprintln(fallback, line)
		return
	}
	c.once.Do(func() { fmt.Fprintln(c.w, line) })
}

// shareStderr gives the two ends of a --loopback run (co, so: copies of o)
// the run's stderr: the client writes to it as it is, the server its notes
// (what arrived of a cut-short size, a -b end that stopped) each line led
// by "server:", so that they are told from the client's, and either end
// the buffer-cap warning once. The ends run at once, so their writes go
// through one lock.
func shareStderr(o, co, so *options) {
	if o.stderr == nil {
		co.stderr, so.stderr = nil, nil
		return
	}
	lw := &lockedWriter{w: o.stderr}
	co.stderr, so.stderr = lw, &prefixWriter{w: lw, prefix: []byte("server:")}
	cw := &capWarner{w: lw}
	co.capWarn, so.capWarn = cw, cw
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// prefixWriter writes each line written to it to w with prefix before
// it, a whole line per Write to w, so that lines written by another
// goroutine to w do not cut into it. A last line without its newline
// waits for the next Write.
type prefixWriter struct {
	mu      sync.Mutex
	w       io.Writer
	prefix  []byte
	pending []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			p.pending = append(p.pending, b...)
			break
		}
		line := make([]byte, 0, len(p.prefix)+len(p.pending)+i+1)
		line = append(append(append(line, p.prefix...), p.pending...), b[:i+1]...)
		p.pending = p.pending[:0]
		if _, err := p.w.Write(line); err != nil {
			return n - len(b), err
		}
		b = b[i+1:]
	}
	return n, nil
}
