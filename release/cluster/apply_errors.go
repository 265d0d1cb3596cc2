package cluster

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/object"
)

// FieldConflict is one field another field manager owns.
type FieldConflict struct {
	// Manager is the other field manager, e.g. "kubectl-scale".
	Manager string `json:"manager"`
	// Subresource is set when the manager wrote the field through one
	// (e.g. "scale").
	Subresource string `json:"subresource,omitempty"`
	// Field is the field path, e.g. ".spec.replicas".
	Field string `json:"field"`
}

// FieldConflictError reports that server-side apply refused to change
// fields another field manager owns (exit code 6). Re-applying with
// ApplyOptions.Force (--force-conflicts) takes them over.
type FieldConflictError struct {
	Object    object.Ref
	Conflicts []FieldConflict
	// Err is the API server's error.
	Err error
}

func (e *FieldConflictError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "apply %s: field manager conflict: ", e.Object)
	byManager := map[string][]string{}
	var managers []string
	for _, c := range e.Conflicts {
		m := strconv.Quote(c.Manager)
		if c.Subresource != "" {
			m += fmt.Sprintf(" (subresource %s)", c.Subresource)
		}
		if _, ok := byManager[m]; !ok {
			managers = append(managers, m)
		}
		byManager[m] = append(byManager[m], c.Field)
	}
	for i, m := range managers {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s owned by %s", strings.Join(byManager[m], ", "), m)
	}
	b.WriteString(" (changed by another client since vllmctl applied it); re-run with --force-conflicts to take these fields over")
	return b.String()
}

// Unwrap returns the API server's error.
func (e *FieldConflictError) Unwrap() error { return e.Err }

// ExitCode is 6: the cluster refused.
func (e *FieldConflictError) ExitCode() int { return exitcode.Cluster }

// Managers returns the other field managers, sorted, without repeats.
func (e *FieldConflictError) Managers() []string {
	set := map[string]bool{}
	for _, c := range e.Conflicts {
		set[c.Manager] = true
	}
	out := make([]string, 0, len(set))
	for m := range set {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// Fields returns the conflicting field paths, in the server's order,
// without repeats.
func (e *FieldConflictError) Fields() []string {
	var out []string
	seen := map[string]bool{}
	for _, c := range e.Conflicts {
		if !seen[c.Field] {
			seen[c.Field] = true
			out = append(out, c.Field)
		}
	}
	return out
}

func (e *FieldConflictError) onlyManager(manager string) bool {
	ms := e.Managers()
	return len(ms) == 1 && ms[0] == manager
}

// conflictMessage matches a FieldManagerConflict cause's message, e.g.
// `conflict with "kubectl-scale" using apps/v1` or
// `conflict with "x" with subresource "scale" using apps/v1 at 2025-...`.
var conflictMessage = regexp.MustCompile(`^conflict with ("(?:[^"\\]|\\.)*")(?: with subresource ("(?:[^"\\]|\\.)*"))?`)

// conflictError turns an apply conflict into a *FieldConflictError, or
// returns nil when err is not a field-manager conflict.
func conflictError(ref object.Ref, err error) *FieldConflictError {
	if !apierrors.IsConflict(err) {
		return nil
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return nil
	}
	var conflicts []FieldConflict
	for _, c := range status.Status().Details.Causes {
		if c.Type != metav1.CauseTypeFieldManagerConflict {
			continue
		}
		fc := FieldConflict{Field: c.Field, Manager: c.Message}
		if m := conflictMessage.FindStringSubmatch(c.Message); m != nil {
			if s, err := strconv.Unquote(m[1]); err == nil {
				fc.Manager = s
			}
			if m[2] != "" {
				if s, err := strconv.Unquote(m[2]); err == nil {
					fc.Subresource = s
				}
			}
		}
		conflicts = append(conflicts, fc)
	}
	if len(conflicts) == 0 {
		return nil
	}
	// The server lists them in no fixed order: by field, for output that
	// does not change from run to run.
	sort.SliceStable(conflicts, func(i, j int) bool { return conflicts[i].Field < conflicts[j].Field })
	return &FieldConflictError{Object: ref, Conflicts: conflicts, Err: err}
}

// UnknownKindError reports an object whose kind the cluster does not serve,
// even after refreshing discovery (exit code 6: the cluster cannot take the
// object).
type UnknownKindError struct {
	Object object.Ref
	Err    error
}

func (e *UnknownKindError) Error() string {
	return fmt.Sprintf("%s: the cluster does not serve kind %s in %s (is its CRD installed?): %v",
		e.Object, e.Object.Kind, e.Object.APIVersion(), e.Err)
}

// Unwrap returns the RESTMapper's error.
func (e *UnknownKindError) Unwrap() error { return e.Err }

// ExitCode is 6: the cluster cannot take the object.
func (e *UnknownKindError) ExitCode() int { return exitcode.Cluster }
