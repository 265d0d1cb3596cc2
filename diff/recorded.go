package diff

import (
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// What a revision records besides its objects, as RecordedChange.What
// names it.
const (
	// RecordedHook is a hook (helm.sh/hook) of the revision.
	RecordedHook = "hook"
	// RecordedNotes is the chart's rendered NOTES.txt.
	RecordedNotes = "notes"
	// RecordedCRD is a CustomResourceDefinition of the chart's crds/.
	RecordedCRD = "crd"
	// RecordedValues is a values key vllmctl reads back from the record
	// (serveCheck, analysis), which renders no object.
	RecordedValues = "values"
	// RecordedPostRenderer is the post-renderer the manifest and hooks
	// went through (--post-renderer and its args; name "postRenderer").
	RecordedPostRenderer = "post-renderer"
)

// Labels of the two sides of a recorded item's diff.
const (
	labelRecorded = "recorded"
	labelRendered = "rendered"
)

// RecordedItem is one thing a revision records besides its objects: a
// hook or a CRD of the chart's crds/ (Object set), or its notes, a
// setting or its post-renderer (Text).
type RecordedItem struct {
	// What is RecordedHook, RecordedNotes, RecordedCRD, RecordedValues or
	// RecordedPostRenderer.
	What string
	// Name names it: a hook's or CRD's object ("batch/v1 Job ns/name"),
	// "NOTES.txt" for the notes.
	Name string
	// Object is the item's object (nil for the notes).
	Object *unstructured.Unstructured
	// Text is the notes' text, as the record keeps it (redacted).
	Text string
}

// RecordedChange is one change to what a revision records besides its
// objects: a hook, the notes or a CRD of the chart's crds/ that the new
// revision adds (create), changes (change) or no longer has (prune). A
// deploy with such a change makes a new revision although no object
// changes (Helm records a new revision on every upgrade).
type RecordedChange struct {
	// What is "hook", "notes", "crd", "values" or "post-renderer".
	What string `json:"what"`
	// Name names it: "batch/v1 Job ns/name" for a hook or a CRD,
	// "NOTES.txt" for the notes.
	Name   string `json:"name"`
	Action Action `json:"action"`
	// Diff is a unified diff, the deployed revision's record against the
	// new render ("--- recorded", "+++ rendered"), Secret values masked.
	Diff string `json:"diff"`
}

// CompareRecorded returns the changes from before (what the deployed
// revision records) to after (what the new revision would record), in
// after's order, then the items after no longer has in before's order.
// Items are matched by What and Name. Secret values are masked as in the
// objects' diffs (MaskSecrets).
func CompareRecorded(before, after []RecordedItem) ([]RecordedChange, error) {
	key := func(it RecordedItem) string { return it.What + "\x00" + it.Name }
	old := make(map[string]RecordedItem, len(before))
	for _, it := range before {
		old[key(it)] = it
	}
	seen := map[string]bool{}
	var out []RecordedChange
	for _, it := range after {
		k := key(it)
		seen[k] = true
		prev, ok := old[k]
		action := ActionChange
		if !ok {
			action = ActionCreate
		}
		ch, err := recordedChange(prev, it, ok, true, action)
		if err != nil {
			return nil, err
		}
		if ch != nil {
			out = append(out, *ch)
		}
	}
	for _, it := range before {
		if seen[key(it)] {
			continue
		}
		ch, err := recordedChange(it, RecordedItem{}, true, false, ActionPrune)
		if err != nil {
			return nil, err
		}
		if ch != nil {
			out = append(out, *ch)
		}
	}
	return out, nil
}

// recordedChange compares one item, b (before; hasB) with a (after;
// hasA): nil when they are equal.
func recordedChange(b, a RecordedItem, hasB, hasA bool, action Action) (*RecordedChange, error) {
	item := a
	if !hasA {
		item = b
	}
	from, to := labelRecorded, labelRendered
	if !hasB {
		from = labelNone
	}
	if !hasA {
		to = labelNone
	}
	var before, after []string
	if item.Object == nil && b.Object == nil {
		if hasB && hasA && b.Text == a.Text {
			return nil, nil
		}
		before, after = textLines(b.Text, hasB), textLines(a.Text, hasA)
	} else {
		ob, oa := content(b.Object, hasB), content(a.Object, hasA)
		if hasB && hasA && reflect.DeepEqual(ob, oa) {
			return nil, nil
		}
		MaskSecrets(ob, oa)
		var err error
		if before, err = toYAML(ob); err != nil {
			return nil, fmt.Errorf("render recorded %s %s: %w", item.What, item.Name, err)
		}
		if after, err = toYAML(oa); err != nil {
			return nil, fmt.Errorf("render %s %s: %w", item.What, item.Name, err)
		}
	}
	text := unmask(Unified(before, after, from, to, contextLines))
	if text == "" && hasA && hasB {
		// Equal once rendered (e.g. 1 and 1.0, or a Secret's value
		// masked the same): still a change of the record.
		text = "(the change is in a value that is not shown)\n"
	}
	return &RecordedChange{What: item.What, Name: item.Name, Action: action, Diff: text}, nil
}

// content is a deep copy of obj's content (nil when absent).
func content(obj *unstructured.Unstructured, present bool) map[string]any {
	if !present || obj == nil {
		return nil
	}
	return obj.DeepCopy().Object
}

// textLines splits s into lines that each end in a newline (none when
// absent).
func textLines(s string, present bool) []string {
	if !present || s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if last := lines[len(lines)-1]; !strings.HasSuffix(last, "\n") {
		lines[len(lines)-1] = last + "\n"
	}
	return lines
}
