package charts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"path"
	"slices"
	"sort"
	"strings"

	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/kio"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/vllmctl/vllmctl/internal/secretdata"
)

// PostRenderer is a post-renderer in the executable form (Helm 3's
// `--post-renderer PATH --post-renderer-args ARG`, a Helm 4
// postrenderer/v1 plugin's command): the rendered manifests, objects and
// hooks together, as one YAML stream on its standard input; the
// manifests to use instead on its standard output.
type PostRenderer struct {
	// Path is the executable: a path, or a name looked up in PATH.
	Path string `json:"path"`
	// Args are its arguments, in order.
	Args []string `json:"args,omitempty"`
}

// Limits of a post-renderer's run.
const (
	// MaxPostRenderOutput bounds what a post-renderer may print (its
	// standard output): more is refused, as a chart beyond Helm's size
	// limits is.
	MaxPostRenderOutput = 64 << 20
	// postRenderErrLines is how many of a failing post-renderer's last
	// standard-error lines its error keeps.
	postRenderErrLines = 5
	// postRenderFileAnnotation carries each document's template through
	// the post-renderer, as Helm's does.
	postRenderFileAnnotation = "postrenderer.helm.sh/postrender-filename"
)

// String is the post-renderer as a command line (for messages).
func (p *PostRenderer) String() string {
	return strings.Join(append([]string{p.Path}, p.Args...), " ")
}

// postRender runs p over the rendered files (objects and hooks, NOTES
// taken out), as Helm 4's default ("combined") strategy does: every
// document annotated with its template, merged into one stream, run
// through p, split back by the annotation (a document p adds without one
// is "generated-by-postrender-N.yaml"), the annotation removed. What p
// prints is parsed and checked like any render afterwards, and vllmctl's
// ownership keys are set on it then: p cannot strip them. A p that
// cannot be run, fails, prints nothing, too much or no YAML is an
// *InputError naming it (exit 2); its standard error's last lines are in
// the message (RenderContext teaches RenderOptions.LearnSecrets the
// Secrets they may echo).
func postRender(ctx context.Context, p *PostRenderer, files map[string]string) (map[string]string, error) {
	merged, err := annotateAndMerge(files)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, p.Path, p.Args...)
	cmd.Stdin = strings.NewReader(merged)
	var stdout limitedBuffer
	stdout.max = MaxPostRenderOutput
	var stderr tailBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if ctxErr := ctx.Err(); ctxErr != nil {
		return nil, ctxErr
	}
	fail := func(msg string, err error) error {
		return &InputError{Source: "post-renderer", File: p.Path, Msg: msg, Err: err}
	}
	switch {
	case stdout.over:
		return nil, fail(fmt.Sprintf("printed more than %d MiB", MaxPostRenderOutput>>20), nil)
	case runErr != nil:
		msg := runErr.Error()
		if tail := stderr.tail(postRenderErrLines); tail != "" {
			msg += "; its last lines on stderr:\n" + tail
		}
		return nil, fail(msg, runErr)
	case len(bytes.TrimSpace(stdout.buf.Bytes())) == 0:
		return nil, fail("printed nothing (a post-renderer prints the manifests to use)", nil)
	}
	out, err := splitAndDeannotate(stdout.buf.String())
	if err != nil {
		msg := escapeControl(err.Error())
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		return nil, fail("printed what is not a YAML stream of objects: "+msg, err)
	}
	return out, nil
}

// postRenderedError names the post-renderer p in err, an error of the
// objects it printed (a document that is no Kubernetes object, say).
func postRenderedError(p *PostRenderer, err error) error {
	var ie *InputError
	if !errors.As(err, &ie) {
		return err
	}
	return &InputError{Source: "post-renderer", File: p.Path, Msg: "its output: " + ie.Error(), Err: err}
}

// secretValues are the values of the Secrets among the documents of files
// that parse (secretdata.Values): a document that does not is skipped, so
// that a render or a post-renderer's output that failed still gives what
// it can.
func secretValues(files map[string]string) []string {
	var objs []*unstructured.Unstructured
	for _, content := range files {
		for _, doc := range splitDocuments(content + "\n") {
			if got, err := parseDocument(doc); err == nil {
				objs = append(objs, got...)
			}
		}
	}
	return secretdata.Values(objs...)
}

// annotateAndMerge is Helm's (pkg/action): the non-empty, non-partial
// files in name order, each split as Helm splits a manifest, every
// document annotated with its file, as one stream.
func annotateAndMerge(files map[string]string) (string, error) {
	var nodes []*kyaml.RNode
	for _, name := range slices.Sorted(maps.Keys(files)) {
		content := files[name]
		if strings.HasPrefix(path.Base(name), "_") || strings.TrimSpace(content) == "" {
			continue
		}
		docs := releaseutil.SplitManifests(content)
		keys := slices.Collect(maps.Keys(docs))
		sort.Sort(releaseutil.BySplitManifestsOrder(keys))
		for _, key := range keys {
			doc := docs[key]
			if strings.TrimSpace(doc) == "" {
				continue
			}
			parsed, err := kio.ParseAll(doc)
			if err != nil {
				return "", &InputError{Source: SourceTemplate, File: name, Msg: err.Error(), Err: err}
			}
			for _, n := range parsed {
				if err := n.PipeE(kyaml.SetAnnotation(postRenderFileAnnotation, name)); err != nil {
					return "", &InputError{Source: SourceTemplate, File: name, Msg: err.Error(), Err: err}
				}
				nodes = append(nodes, n)
			}
		}
	}
	return kio.StringAll(nodes)
}

// splitAndDeannotate is Helm's: the stream split back into files by the
// annotation, which is removed.
func splitAndDeannotate(stream string) (map[string]string, error) {
	nodes, err := kio.ParseAll(stream)
	if err != nil {
		return nil, err
	}
	byFile := map[string][]*kyaml.RNode{}
	var order []string
	for i, n := range nodes {
		meta, err := n.GetMeta()
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		name := meta.Annotations[postRenderFileAnnotation]
		if name == "" {
			name = fmt.Sprintf("generated-by-postrender-%d.yaml", i)
		}
		if err := n.PipeE(kyaml.ClearAnnotation(postRenderFileAnnotation)); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if _, ok := byFile[name]; !ok {
			order = append(order, name)
		}
		byFile[name] = append(byFile[name], n)
	}
	out := make(map[string]string, len(byFile))
	for _, name := range order {
		s, err := kio.StringAll(byFile[name])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = s
	}
	return out, nil
}

// limitedBuffer keeps at most max bytes; what comes beyond is dropped
// and over is set (the writer still succeeds, so that the process is not
// killed by a broken pipe before it is judged).
// It is no io.ReaderFrom (a bytes.Buffer's ReadFrom would read past
// max): exec copies into it through Write.
type limitedBuffer struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); len(p) > room {
		b.over = true
		if room > 0 {
			b.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return b.buf.Write(p)
}

// tailBuffer keeps the last 64 KiB written to it.
type tailBuffer struct {
	buf []byte
}

const tailBufferSize = 64 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - tailBufferSize; over > 0 {
		t.buf = t.buf[over:]
	}
	return len(p), nil
}

// tail is the last n non-empty lines, control characters other than tab
// shown escaped.
func (t *tailBuffer) tail(n int) string {
	var lines []string
	for _, l := range strings.Split(string(t.buf), "\n") {
		if l = strings.TrimRight(l, "\r"); strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		lines[i] = escapeControl(l)
	}
	return strings.Join(lines, "\n")
}

// escapeControl shows the control characters of s (but tab) as Go
// escapes, so that a tool's output cannot drive the terminal.
func escapeControl(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r != '\t' && (r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0) {
			fmt.Fprintf(&b, "\\x%02x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
