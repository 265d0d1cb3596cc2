package diff

import (
	"bytes"
	"io"
	"sync"
)

// Writer is where a command's output leaves the program: every line
// written through it passes through its Redactor ([Redactor.Line]) before
// it reaches the underlying writer, whatever printed it (tables, progress
// lines, documents, errors, a live view). A line ends at "\n" or "\r";
// the rest of a write waits for its end, or for Flush. Documents are
// redacted before they are encoded ([Writer.Redactor], [RedactCopy]), so
// that the JSON escapes of a value cannot hide it and a withheld string
// stays a string. It is safe for concurrent use.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	red *Redactor
	buf []byte
}

// NewWriter returns a Writer passing what is written to w through red.
func NewWriter(w io.Writer, red *Redactor) *Writer { return &Writer{w: w, red: red} }

// Unwrap returns the underlying writer: what tells whether the output is
// a terminal (termout.IsTerminal) looks through the Writer.
func (w *Writer) Unwrap() io.Writer { return w.w }

// Redactor is the writer's Redactor.
func (w *Writer) Redactor() *Redactor { return w.red }

// Write writes p's complete lines, redacted, and keeps the rest. It
// reports len(p) unless the underlying writer fails.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	end := bytes.LastIndexAny(w.buf, "\n\r")
	if end < 0 {
		return len(p), nil
	}
	out := w.clean(w.buf[:end+1])
	w.buf = append(w.buf[:0], w.buf[end+1:]...)
	if _, err := w.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes what is left of the last line, redacted.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) == 0 {
		return nil
	}
	out := w.clean(w.buf)
	w.buf = w.buf[:0]
	_, err := w.w.Write(out)
	return err
}

// clean redacts each line of b, keeping its line ends.
func (w *Writer) clean(b []byte) []byte {
	if !w.red.knowsAny() {
		return append([]byte(nil), b...)
	}
	var out []byte
	for len(b) > 0 {
		i := bytes.IndexAny(b, "\n\r")
		line, end := b, []byte(nil)
		if i >= 0 {
			line, end = b[:i], b[i:i+1]
		}
		out = append(out, w.red.Line(string(line))...)
		out = append(out, end...)
		b = b[len(line)+len(end):]
	}
	return out
}
