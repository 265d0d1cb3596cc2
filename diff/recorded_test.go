package diff_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/diff"
)

func secretHook(value string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": "db", "annotations": map[string]any{"helm.sh/hook": "pre-upgrade"}},
		"stringData": map[string]any{"password": value},
	}}
}

// TestCompareRecorded: hooks, notes and CRDs are matched by what and
// name; equal ones are left out, and a Secret hook's values never show.
func TestCompareRecorded(t *testing.T) {
	hook := func(v string) diff.RecordedItem {
		return diff.RecordedItem{What: diff.RecordedHook, Name: "v1 Secret ml/db", Object: secretHook(v)}
	}
	notes := func(s string) diff.RecordedItem {
		return diff.RecordedItem{What: diff.RecordedNotes, Name: "NOTES.txt", Text: s}
	}
	cases := []struct {
		name          string
		before, after []diff.RecordedItem
		want          []diff.Action
		shows, hides  string
	}{
		{name: "equal", before: []diff.RecordedItem{hook("OLDPW1"), notes("hi\n")}, after: []diff.RecordedItem{hook("OLDPW1"), notes("hi\n")}},
		{name: "secret value changed, masked", before: []diff.RecordedItem{hook("OLDPW1")}, after: []diff.RecordedItem{hook("NEWPW2")},
			want: []diff.Action{diff.ActionChange}, shows: diff.MarkerChanged, hides: "PW"},
		{name: "notes changed", before: []diff.RecordedItem{notes("hello\n")}, after: []diff.RecordedItem{notes("bonjour\n")},
			want: []diff.Action{diff.ActionChange}, shows: "+bonjour"},
		{name: "added and removed", before: []diff.RecordedItem{notes("x")}, after: []diff.RecordedItem{hook("NEWPW2")},
			want: []diff.Action{diff.ActionCreate, diff.ActionPrune}, shows: "--- /dev/null", hides: "NEWPW2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := diff.CompareRecorded(tc.before, tc.after)
			require.NoError(t, err)
			var actions []diff.Action
			var text string
			for _, c := range got {
				actions = append(actions, c.Action)
				text += c.Diff
			}
			assert.Equal(t, tc.want, actions)
			if tc.shows != "" {
				assert.Contains(t, text, tc.shows)
			}
			if tc.hides != "" {
				assert.NotContains(t, text, tc.hides)
			}
		})
	}
}
