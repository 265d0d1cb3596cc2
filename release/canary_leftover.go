package release

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/release/canary"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
)

// The canaries left behind (canary.Leftover) that an operation meets: deploy
// and rollback say which they replace, wait and status read them.

// emitCanaryLeftovers says, for an operation of rec that replaces them,
// which leftovers among the live objects it read before applying it
// replaces (those of rec's own revision are its own canary).
func (e *Engine) emitCanaryLeftovers(rec *storage.Release, live []*unstructured.Unstructured, replacement string) {
	for _, l := range canary.Leftovers(live) {
		if l.Revision == rec.Revision {
			continue
		}
		e.emit(rec.Name, rec.Revision, PhaseCanary, "Deployment "+l.Deployment, "left behind", l.String()+"; "+replacement)
	}
}

// beforeObjects are the live objects an apply read before applying.
func beforeObjects(applied []cluster.ApplyResult) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, a := range applied {
		if a.Before != nil {
			out = append(out, a.Before)
		}
	}
	return out
}

// liveCanaryLeftovers reads the live copies of the Deployments among objs
// and returns those that carry a canary's transient strategy
// (canary.LiveLeftovers).
func (e *Engine) liveCanaryLeftovers(ctx context.Context, objs []*unstructured.Unstructured) ([]canary.Leftover, error) {
	if e.Objects == nil {
		return nil, nil
	}
	return canary.LiveLeftovers(ctx, e.Objects, objs, e.Namespace())
}
