package release

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/owner"
)

// ForeignObject is an existing object a release would write that is not
// the release's: another release's, or created by other means.
type ForeignObject struct {
	Object object.Ref `json:"object"`
	// Owner is who has it: "release X" (another vllmctl release) or its
	// field managers.
	Owner string `json:"owner"`
}

func (f ForeignObject) String() string { return f.Object.String() + " (" + f.Owner + ")" }

// OwnershipError refuses a deploy that would take over objects it does not
// own (exit code 6, nothing applied): `--take-ownership` adopts them.
type OwnershipError struct {
	Name    string
	Objects []ForeignObject
}

func (e *OwnershipError) Error() string {
	parts := make([]string, len(e.Objects))
	for i, o := range e.Objects {
		parts[i] = o.String()
	}
	return fmt.Sprintf("release %s: refusing to take over %d existing object(s) it does not own, nothing applied: %s; "+
		"--take-ownership adopts them (they then belong to release %s, and its uninstall deletes them)",
		e.Name, len(e.Objects), strings.Join(parts, ", "), e.Name)
}

// ExitCode is 6: the cluster holds objects the release may not change.
func (e *OwnershipError) ExitCode() int { return exitcode.Cluster }

// foreignObjects returns, of the live copies of the objects a release
// would write (nil: absent), those that are not the release's (release
// name in namespace ns).
func foreignObjects(name, ns string, live []*unstructured.Unstructured) []ForeignObject {
	var out []ForeignObject
	for _, o := range live {
		if o == nil || owner.Owns(o, name, ns) {
			continue
		}
		out = append(out, ForeignObject{Object: object.RefOf(o), Owner: owner.Describe(o)})
	}
	return out
}

// ownershipNote is the description note of a deploy that took ownership.
func ownershipNote(objs []ForeignObject) string {
	parts := make([]string, len(objs))
	for i, o := range objs {
		parts[i] = o.String()
	}
	return "took ownership of " + strings.Join(parts, ", ")
}
