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

// serverNotes returns where the server of a --loopback run writes its
// notes (what arrived of a cut-short size, a -b end that stopped): the
// run's stderr, each line led by "server:", so that they are told from the
// client's; nil if the run's stderr is nil.
func serverNotes(w io.Writer) io.Writer {
	if w == nil {
		return nil
	}
	return &prefixWriter{w: w, prefix: []byte("server:")}
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
