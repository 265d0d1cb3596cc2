package release

import (
	"fmt"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
)

// The one redaction rule: an operation's Redactor knows the values of
// every Secret the operation rendered or read, and every string that
// leaves the program passes through it at one of two points:
//   - a record, before it is written (storage.Rewriting with
//     diff.RedactCopy): every string except the fields the record's type
//     tags `redact:"keep"` (names, chart, values, manifests: the record is
//     itself a Secret), so that every reader (status, history, a later
//     operation) prints what the record holds;
//   - the command's output streams (diff.Writer): every line, and every
//     document before it is encoded.
//
// Results and errors returned by the engine are not redacted: what prints
// them does. What prints a record's Secrets' values (get values) or runs
// without rendering (wait, test, uninstall's hooks) learns the record's
// Secrets first (LearnRecord).

// UseRedactor makes red the engine's Redactor: it learns the Secrets of
// what the engine renders, and every record the engine writes from now on
// is redacted before it is written.
func (e *Engine) UseRedactor(red *diff.Redactor) {
	e.Redactor = red
	if red == nil || e.Store == nil {
		return
	}
	e.Store = storage.Rewriting(e.Store, func(r *storage.Release) *storage.Release {
		return diff.RedactCopy(red, r)
	})
}

// LearnRecord teaches red the values of the Secrets of rec's manifest and
// of its hooks. It learns from every manifest that parses and returns the
// first error of one that does not (naming the release and revision).
func LearnRecord(red *diff.Redactor, rec *storage.Release) error {
	if red == nil {
		return nil
	}
	var first error
	learn := func(what, manifest string) {
		objs, err := cluster.ParseManifest(manifest)
		if err != nil {
			if first == nil {
				first = fmt.Errorf("release %s revision %d: %s, read for its Secrets: %w", rec.Name, rec.Revision, what, err)
			}
			return
		}
		red.AddObjects(objs...)
	}
	learn("its manifest", rec.Manifest)
	for _, h := range rec.Hooks {
		learn("hook "+h.Kind+" "+h.Name, h.Manifest)
	}
	return first
}

// WithholdSecretValues returns manifest (a record's, or a hook's) with
// the values of its Secrets' data and stringData replaced by
// diff.Redacted, for printing (get manifest, get hooks); other objects
// are kept as recorded, byte for byte when it holds no Secret.
func WithholdSecretValues(manifest string) (string, error) {
	objs, err := cluster.ParseManifest(manifest)
	if err != nil {
		return "", err
	}
	secrets := false
	for _, o := range objs {
		if o.GetKind() != "Secret" || o.GroupVersionKind().Group != "" {
			continue
		}
		secrets = true
		for _, field := range []string{"data", "stringData"} {
			if m, ok := o.Object[field].(map[string]any); ok {
				for k := range m {
					m[k] = diff.Redacted
				}
			}
		}
	}
	if !secrets {
		return manifest, nil // as recorded
	}
	return charts.Manifest(objs)
}

// learnSecrets is the render's charts.RenderOptions.LearnSecrets: the
// engine's Redactor learns the rendered Secrets a failing post-renderer
// may echo in its error (nil without a Redactor).
func (e *Engine) learnSecrets() func(...string) {
	if e.Redactor == nil {
		return nil
	}
	return e.Redactor.AddValues
}
