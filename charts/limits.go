package charts

import (
	"errors"
	"fmt"
	"io"
	"os"
	"unicode/utf8"
)

// MaxValuesFileBytes caps a values file (-f/--values) and a file of
// --set-file: Helm 4's per-file cap of a chart's files
// (helm.sh/helm/v4/pkg/chart/loader/archive.MaxDecompressedFileSize,
// 5 MiB). Values are recorded with the revision, in a Secret of at most
// 1 MiB, so a larger file could never be deployed anyway; reading one is
// bounded so that /dev/zero or a huge file is refused at once.
const MaxValuesFileBytes = 5 << 20

// errTooLarge reports a file over its cap.
var errTooLarge = errors.New("file too large")

// ReadFileCapped reads the file at path, at most limit bytes: a larger
// one (or an endless one, such as /dev/zero) is an error, read no further
// than limit+1 bytes. Every input file vllmctl reads goes through it.
func ReadFileCapped(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: larger than the cap of %s (%d bytes)", errTooLarge, sizeName(limit), limit)
	}
	return data, nil
}

// sizeName writes n bytes for people: "5 MiB".
func sizeName(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// textProblem says why data cannot be a YAML string value (as --set-file
// gives it to the templates and the record): "" when it can. YAML takes
// UTF-8 text without control characters other than tab, newline and
// carriage return (YAML 1.2's printable set).
func textProblem(data []byte) string {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return fmt.Sprintf("not UTF-8 text (byte %d); --set-file takes a text file", i)
		case r == '\t' || r == '\n' || r == '\r' || r == 0x85:
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0xfffe || r == 0xffff:
			return fmt.Sprintf("a binary file: control character %U at byte %d, which YAML does not allow; --set-file takes a text file (encode binary data, e.g. with base64, first)", r, i)
		}
		i += size
	}
	return ""
}
