// Package syncbuf is test support: a bytes.Buffer that goroutines (or the
// copier of a child process's output) write while another goroutine reads
// it.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer whose methods may be called concurrently. The
// zero Buffer is empty and ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns the buffer's contents so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
