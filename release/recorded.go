package release

import (
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
)

// recorded is what a revision records besides its objects: its hooks, its
// notes, the CRDs of the chart's crds/ (one YAML stream), and the values
// vllmctl itself reads back from the record (settingKeys). A deploy whose
// recorded differs from the deployed revision's is never "up to date",
// and diff reports the difference (diff.Report.Recorded).
type recorded struct {
	hooks       []storage.Hook
	notes       string
	crdManifest string
	// values are the computed values; only settingKeys of them count.
	values map[string]any
	// postRenderer is the post-renderer the manifest and hooks go
	// through (nil: none): a change to it alone is a new revision that
	// records it, so the record tells what the objects went through.
	postRenderer *charts.PostRenderer
}

// settingKeys are the values that render no object but that vllmctl
// reads from a revision's record when it checks the revision later
// (rollback, wait, test: the serve check's and the analysis' settings): a
// change to them alone is a new revision, or the record would keep the
// old ones.
func settingKeys() []string { return []string{"analysis", "serveCheck"} }

// recordedOf is what rec records besides its objects.
func recordedOf(rec *storage.Release) recorded {
	return recorded{hooks: rec.Hooks, notes: rec.Notes, crdManifest: rec.CRDManifest, values: rec.ComputedValues, postRenderer: rec.PostRenderer}
}

// items returns r as diff compares it; hooks of namespaced kinds that
// name no namespace are in namespace. what names the record in errors.
func (r recorded) items(namespace, what string) ([]diff.RecordedItem, error) {
	var out []diff.RecordedItem
	for _, h := range r.hooks {
		objs, err := cluster.ParseManifest(h.Manifest)
		if err != nil {
			return nil, fmt.Errorf("%s: hook %s %s: %w", what, h.Kind, h.Name, err)
		}
		for _, o := range objs {
			out = append(out, diff.RecordedItem{What: diff.RecordedHook, Name: charts.RefIn(o, namespace).String(), Object: o})
		}
	}
	if r.notes != "" {
		out = append(out, diff.RecordedItem{What: diff.RecordedNotes, Name: "NOTES.txt", Text: r.notes})
	}
	crds, err := cluster.ParseManifest(r.crdManifest)
	if err != nil {
		return nil, fmt.Errorf("%s: its CRDs: %w", what, err)
	}
	for _, o := range crds {
		out = append(out, diff.RecordedItem{What: diff.RecordedCRD, Name: object.RefOf(o).String(), Object: o})
	}
	for _, k := range settingKeys() {
		v, ok := r.values[k]
		if !ok || v == nil {
			continue
		}
		text, err := yaml.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%s: values %s: %w", what, k, err)
		}
		out = append(out, diff.RecordedItem{What: diff.RecordedValues, Name: k, Text: string(text)})
	}
	if r.postRenderer != nil {
		out = append(out, diff.RecordedItem{What: diff.RecordedPostRenderer, Name: "postRenderer", Text: r.postRenderer.String() + "\n"})
	}
	return out, nil
}

// deployedRecord returns the record of the deployed revision among
// entries (the highest one; nil when none is deployed).
func deployedRecord(entries []storage.Entry) (*storage.Release, error) {
	if e, ok := storage.DeployedAmong(entries); ok {
		return e.Release()
	}
	return nil, nil
}

// recordedChanges compares next, what the new revision would record
// besides its objects, with what the deployed revision among entries
// records: nil on an install (no deployed revision). The notes are
// compared as a record keeps them, through the engine's Redactor.
func (e *Engine) recordedChanges(entries []storage.Entry, next recorded) ([]diff.RecordedChange, error) {
	rec, err := deployedRecord(entries)
	if err != nil || rec == nil {
		return nil, err
	}
	if rec.ComputedValues == nil {
		// A record written before computed values were kept (or adopted
		// from a Helm record without them) cannot say what its settings
		// were: they are not compared.
		next.values = nil
	}
	if next.notes != rec.Notes && e.Redactor != nil {
		next.notes = e.Redactor.Text(next.notes)
	}
	what := fmt.Sprintf("release %s revision %d", rec.Name, rec.Revision)
	before, err := recordedOf(rec).items(e.Namespace(), what)
	if err != nil {
		return nil, err
	}
	after, err := next.items(e.Namespace(), fmt.Sprintf("release %s", rec.Name))
	if err != nil {
		return nil, err
	}
	changes, err := diff.CompareRecorded(before, after)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return changes, nil
}
