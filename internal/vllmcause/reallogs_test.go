// The cause classifier scored on real failure logs: logs users pasted into
// public issue threads (vLLM, KServe, llm-d, production-stack, KubeAI and
// others), each with the cause a human reads in it. testdata/reallogs
// holds them, INDEX.tsv names each one's expected cause and source.

package vllmcause

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
var realLogsDir = filepath.Join("..", "..", "testdata", "reallogs")

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

// realLogSource is the source of a corpus log for the leave-one-source-out
// score: the repository of a GitHub URL ("vllm-project/vllm"), else the
// URL's host and path.
func realLogSource(url string) string {
	rest := strings.TrimPrefix(strings.TrimPrefix(url, "https://"), "http://")
	if r, ok := strings.CutPrefix(rest, "github.com/"); ok {
		parts := strings.SplitN(r, "/", 3)
		if len(parts) >= 2 {
			return parts[0] + "/" + parts[1]
		}
	}
	rest, _, _ = strings.Cut(rest, "#")
	return rest
}

// causeTally counts right answers by expected cause.
type causeTally map[Cause][2]int

func (c causeTally) add(cause Cause, right bool) {
	v := c[cause]
	v[1]++
	if right {
		v[0]++
	}
	c[cause] = v
}

func (c causeTally) String() string {
	var parts []string
	for _, cause := range knownCauses {
		if v, ok := c[cause]; ok {
			parts = append(parts, fmt.Sprintf("%s %d/%d", cause, v[0], v[1]))
		}
	}
	return strings.Join(parts, ", ")
}

// TestRealLogCorpusLeaveOneSourceOut scores the corpus as logs from a
// source the rules were not written for would be: for each source (a
// repository, see realLogSource), its logs are classified without the
// patterns whose only provenance is a log of that source (causePattern.logs);
// patterns derived from where vLLM or a library raises the message
// (causePattern.where) count for every source. The plain score is printed
// beside it, both by cause. No log may get a wrong known cause in any
// fold.
func TestRealLogCorpusLeaveOneSourceOut(t *testing.T) {
	logs := readRealLogIndex(t)
	source := map[string]string{}
	for _, l := range logs {
		source[l.file] = realLogSource(l.url)
	}
	for _, p := range causePatterns() {
		for _, f := range p.logs {
			assert.Contains(t, source, f, "pattern %q: provenance log not in INDEX.tsv", p.re)
		}
	}
	bySource := map[string][]realLog{}
	var sources []string
	for _, l := range logs {
		s := source[l.file]
		if _, ok := bySource[s]; !ok {
			sources = append(sources, s)
		}
		bySource[s] = append(bySource[s], l)
	}

	plainCls := newClassifier()
	var plain, held realLogScore
	plainBy, heldBy := causeTally{}, causeTally{}
	disabled := 0
	for _, s := range sources {
		keep := func(p causePattern) bool {
			if p.where != "" || len(p.logs) == 0 {
				return true
			}
			for _, f := range p.logs {
				if source[f] != s {
					return true
				}
			}
			return false
		}
		for _, p := range causePatterns() {
			if !keep(p) {
				disabled++
			}
		}
		foldCls := newClassifierWith(keep)
		for _, l := range bySource[s] {
			data, err := os.ReadFile(filepath.Join(realLogsDir, l.file))
			require.NoError(t, err, l.file)
			in := causeInput{logs: [][]string{lastLines(data, 100000)}}
			for _, c := range []struct {
				cls   *classifier
				score *realLogScore
				by    causeTally
				fold  string
			}{{plainCls, &plain, plainBy, "plain"}, {foldCls, &held, heldBy, "without " + s + "'s log-only patterns"}} {
				got, evidence, _ := c.cls.classify(in)
				c.by.add(l.cause, got == l.cause)
				switch {
				case got == l.cause:
					c.score.right++
					continue
				case got == CauseUnknown:
					c.score.missed++
				default:
					c.score.wrongKnown++
				}
				c.score.misses = append(c.score.misses, fmt.Sprintf("%s (%s): want %s, got %s %q", l.file, c.fold, l.cause, got, evidence))
			}
		}
	}
	t.Logf("plain: %s", plain)
	t.Logf("  by cause: %s", plainBy)
	t.Logf("leave-one-source-out (%d sources, %d log-only patterns left out over all folds): %s", len(sources), disabled, held)
	t.Logf("  by cause: %s", heldBy)
	for _, m := range held.misses {
		t.Log("  " + m)
	}
	assert.Zero(t, plain.wrongKnown, "logs classified as a wrong known cause")
	assert.Zero(t, held.wrongKnown, "logs classified as a wrong known cause in a leave-one-source-out fold")
	assert.GreaterOrEqual(t, float64(held.right), 0.95*float64(len(logs)), "leave-one-source-out: %s", held)
}
