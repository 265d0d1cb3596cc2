// The cause classifier scored on real failure logs: logs users pasted into
// public issue threads (vLLM, KServe, llm-d, production-stack, KubeAI and
// others), each with the cause a human reads in it. testdata/reallogs
// holds them, INDEX.tsv names each one's expected cause and source.

package wait

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// realLogsDir is the corpus of real failure logs, from the package's
// directory.
var realLogsDir = filepath.Join("..", "testdata", "reallogs")

// realLog is one entry of the corpus's index.
type realLog struct {
	file, url, version, note string
	cause                    Cause
}

// knownCauses are the causes the classifier can give, unknown included.
var knownCauses = []Cause{CauseGPUOOM, CauseKVCache, CauseModelAuth, CauseModelNotFound, CauseShm, CauseNCCL,
	CauseDtypeUnsupported, CauseTensorParallel, CauseGPUNotVisible, CauseCUDADriver, CauseStartupProbe, CauseUnknown}

// readRealLogIndex reads INDEX.tsv: a header, then file, expected cause,
// source URL, vLLM version and a note, tab-separated.
func readRealLogIndex(t *testing.T) []realLog {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(realLogsDir, "INDEX.tsv"))
	require.NoError(t, err)
	var out []realLog
	sc := bufio.NewScanner(bytes.NewReader(data))
	header := true
	for n := 1; sc.Scan(); n++ {
		if header {
			require.Equal(t, "file\tcause\turl\tvllm\tnote", sc.Text(), "INDEX.tsv header")
			header = false
			continue
		}
		cols := strings.Split(sc.Text(), "\t")
		require.Len(t, cols, 5, "INDEX.tsv line %d", n)
		out = append(out, realLog{file: cols[0], cause: Cause(cols[1]), url: cols[2], version: cols[3], note: cols[4]})
	}
	require.NoError(t, sc.Err())
	return out
}

// realLogScore counts the classifier's answers on the corpus.
type realLogScore struct {
	right, wrongKnown, missed int
	misses                    []string
}

func (s realLogScore) String() string {
	total := s.right + s.wrongKnown + s.missed
	return fmt.Sprintf("real-log corpus: %d/%d right (%.1f%%), %d wrong known causes, %d unknown where a cause was expected",
		s.right, total, 100*float64(s.right)/float64(max(total, 1)), s.wrongKnown, s.missed)
}

// TestRealLogCorpus classifies each real log, as the failing container's
// only log tail (no events, termination or spec), and scores the answers
// against the expected causes: a wrong known cause is worse than unknown,
// so none is allowed; a log expected unknown given a cause counts as one.
func TestRealLogCorpus(t *testing.T) {
	logs := readRealLogIndex(t)
	require.GreaterOrEqual(t, len(logs), 60, "corpus size")

	seen := map[string]bool{}
	unknowns := 0
	for _, l := range logs {
		assert.False(t, seen[l.file], "%s indexed twice", l.file)
		seen[l.file] = true
		assert.Contains(t, knownCauses, l.cause, "%s: expected cause", l.file)
		assert.True(t, strings.HasPrefix(l.url, "https://"), "%s: source URL %q", l.file, l.url)
		assert.NotEmpty(t, l.note, "%s: note", l.file)
		if l.cause == CauseUnknown {
			unknowns++
		}
	}
	assert.GreaterOrEqual(t, unknowns, 15, "logs whose failure is none of the causes")
	files, err := filepath.Glob(filepath.Join(realLogsDir, "*.log"))
	require.NoError(t, err)
	for _, f := range files {
		assert.True(t, seen[filepath.Base(f)], "%s is not in INDEX.tsv", filepath.Base(f))
	}

	cls := newClassifier()
	var score realLogScore
	for _, l := range logs {
		data, err := os.ReadFile(filepath.Join(realLogsDir, l.file))
		require.NoError(t, err, l.file)
		got, evidence, _ := cls.classify(causeInput{logs: [][]string{lastLines(data, 100000)}})
		switch {
		case got == l.cause:
			score.right++
			continue
		case got == CauseUnknown:
			score.missed++
		default:
			score.wrongKnown++
		}
		score.misses = append(score.misses, fmt.Sprintf("%s: want %s, got %s (%s) %q", l.file, l.cause, got, l.url, evidence))
	}
	t.Log(score)
	for _, m := range score.misses {
		t.Log("  " + m)
	}
	assert.Zero(t, score.wrongKnown, "logs classified as a wrong known cause")
	assert.GreaterOrEqual(t, float64(score.right), 0.9*float64(len(logs)), "%s", score)
}
