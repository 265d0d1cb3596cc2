package release

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// What a rollout produced: the ReplicaSet of each Deployment and the
// ControllerRevision of each StatefulSet, found once their controllers
// observed the applied generation (or the controller stalled).

// controllerStallTimeout is ControllerStallTimeout or its default.
func (e *Engine) controllerStallTimeout() time.Duration {
	if e.ControllerStallTimeout > 0 {
		return e.ControllerStallTimeout
	}
	return wait.DefaultControllerStallTimeout
}

// replicaSetFailure is the diagnosis of a failed ReplicaSet discovery: a
// stalled controller's (verdict ControllerStalled), a timeout, or else
// ReplicaSetNotFound.
func replicaSetFailure(err error) *rollout.Diagnosis {
	var stalled *wait.ControllerStalledError
	if errors.As(err, &stalled) {
		return stalled.Diagnosis()
	}
	f := &rollout.Diagnosis{Reason: "ReplicaSetNotFound", Message: err.Error()}
	if errors.Is(err, context.DeadlineExceeded) {
		f.Reason = "Timeout"
	}
	return f
}

// discoverReplicaSets finds the ReplicaSet of every Deployment and the
// ControllerRevision of every StatefulSet among objs within ctx, records
// them on rec (a rewrite that also refreshes the lock) and reports them as
// progress.
func (e *Engine) discoverReplicaSets(ctx context.Context, rec *storage.Release, objs []*unstructured.Unstructured, applied []cluster.ApplyResult) error {
	live := map[string]*unstructured.Unstructured{}
	for _, a := range applied {
		if a.Live != nil && !a.Unvalidated {
			live[a.Object.String()] = a.Live
		}
	}
	stall := cluster.Stall{Timeout: e.controllerStallTimeout(), Clock: e.clock()}
	refs, err := cluster.CurrentReplicaSetsFrom(ctx, e.Client, objs, e.Namespace(), live, stall)
	if err != nil {
		return err
	}
	crs, err := cluster.CurrentControllerRevisionsFrom(ctx, e.Client, objs, e.Namespace(), live, stall)
	if err != nil {
		return err
	}
	for _, rs := range refs {
		e.emit(rec.Name, rec.Revision, PhaseReplicaSet, "Deployment "+e.Namespace()+"/"+rs.Deployment, rs.Name,
			fmt.Sprintf("pod-template-hash %s, revision %d", rs.PodTemplateHash, rs.Revision))
	}
	e.emitControllerRevisions(rec, crs)
	if len(refs) > 0 {
		rec.ReplicaSets = refs // else none among objs (a wave of groups)
	}
	rec.ControllerRevisions = mergeControllerRevisions(rec.ControllerRevisions, crs)
	rec.Updated = storage.Stamp(e.clock())
	return e.Store.Update(ctx, rec)
}

// emitControllerRevisions reports the ControllerRevisions found.
func (e *Engine) emitControllerRevisions(rec *storage.Release, crs []storage.ControllerRevisionRef) {
	for _, cr := range crs {
		e.emit(rec.Name, rec.Revision, PhaseReplicaSet, "StatefulSet "+e.Namespace()+"/"+cr.StatefulSet, cr.Name,
			fmt.Sprintf("controller-revision-hash %s, revision %d", cr.Hash, cr.Revision))
	}
}

// mergeControllerRevisions returns have with the StatefulSets of found
// replaced or added (a grouped rollout finds its groups' revisions wave
// by wave), ordered by StatefulSet.
func mergeControllerRevisions(have, found []storage.ControllerRevisionRef) []storage.ControllerRevisionRef {
	out := slices.Clone(have)
	for _, cr := range found {
		if i := slices.IndexFunc(out, func(h storage.ControllerRevisionRef) bool { return h.StatefulSet == cr.StatefulSet }); i >= 0 {
			out[i] = cr
		} else {
			out = append(out, cr)
		}
	}
	slices.SortStableFunc(out, func(a, b storage.ControllerRevisionRef) int { return strings.Compare(a.StatefulSet, b.StatefulSet) })
	return out
}
