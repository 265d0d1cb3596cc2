package release

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kwait "k8s.io/apimachinery/pkg/util/wait"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// HookRun is what running one hook did.
type HookRun struct {
	// Name and Kind name the hook's object.
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Event is the event it ran at.
	Event charts.HookEvent `json:"event"`
	// Phase is "succeeded" or "failed".
	Phase string `json:"phase"`
	// StartedAt and CompletedAt bound the run.
	StartedAt   time.Time `json:"startedAt"`
	CompletedAt time.Time `json:"completedAt"`
	// Failure is the diagnosis of a failed hook.
	Failure *rollout.Diagnosis `json:"failure,omitempty"`
}

// The phases of a hook run.
const (
	HookSucceeded = "succeeded"
	HookFailed    = "failed"
)

// HookError is a hook that failed: nothing after it ran or was applied.
type HookError struct {
	Name     string
	Revision int
	Event    charts.HookEvent
	Hook     string // its object, "Kind name"
	Failure  *rollout.Diagnosis
	Err      error
}

func (e *HookError) Error() string {
	return fmt.Sprintf("release %s revision %d: %s", e.Name, e.Revision, e.detail())
}

// detail is the error without the release: which hook failed and why.
func (e *HookError) detail() string {
	msg := fmt.Sprintf("%s hook %s failed", e.Event, e.Hook)
	switch {
	case e.Failure != nil:
		msg += ": " + e.Failure.Summary()
	case e.Err != nil:
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *HookError) Unwrap() error { return e.Err }

// hooksOf returns the hooks of rec that run at event, parsed, in the
// order Helm runs them (charts.HooksFor).
func hooksOf(rec *storage.Release, event charts.HookEvent) ([]charts.Hook, error) {
	var hooks []charts.Hook
	for _, h := range rec.Hooks {
		if !slices.Contains(h.Events, event) {
			continue
		}
		objs, err := cluster.ParseManifest(h.Manifest)
		if err != nil || len(objs) != 1 {
			return nil, fmt.Errorf("release %s revision %d: hook %s %s: its recorded manifest is not one object: %v",
				rec.Name, rec.Revision, h.Kind, h.Name, err)
		}
		hooks = append(hooks, charts.Hook{Object: objs[0], Path: h.Path, Events: h.Events, Weight: h.Weight, DeletePolicies: h.DeletePolicies})
	}
	return charts.HooksFor(hooks, event), nil
}

// runHooks runs the hooks of rec at event, one after the other, as Helm
// runs them: each one's object is deleted first when its policy says
// before-hook-creation (the default), then applied; a Job or a Pod is
// waited for until it completes, with the rollout verdicts (a crash loop,
// an OOM kill, an image that cannot be pulled fail it at once), within
// timeout. The first hook that fails stops the run: it is deleted if its
// policy says hook-failed, those before it if theirs says hook-succeeded,
// and a *HookError says why. When all succeed, those whose policy says
// hook-succeeded are deleted. While a hook is waited for, rec's lock (if
// rec is pending) is kept fresh. The Redactor learns the values of the
// hooks' and rec's Secrets first, so that no output or record of the run
// shows them.
func (e *Engine) runHooks(ctx context.Context, rec *storage.Release, event charts.HookEvent, timeout time.Duration) ([]HookRun, error) {
	hooks, err := hooksOf(rec, event)
	if err != nil || len(hooks) == 0 {
		return nil, err
	}
	// A hook may print the release's own Secrets too (a test sending its
	// API key): `test` and `uninstall` render nothing, so they are learnt
	// from the record. A manifest that does not parse holds none that
	// could be learnt (the hooks of this event parsed above); what reads
	// it to act refuses it.
	_ = LearnRecord(e.Redactor, rec)
	var runs []HookRun
	for i, h := range hooks {
		run, err := e.runHook(ctx, rec, h, event, timeout)
		runs = append(runs, run)
		if err != nil {
			// An interrupted hook failed too: its delete policies are
			// honoured on a context of their own, which the interrupt
			// does not end.
			dctx, cancel := storage.FinishContext(ctx)
			e.deleteHooks(dctx, rec, hooks[i:i+1], charts.HookFailed)
			if ctx.Err() != nil && hookFailure(err).Reason == "ApplyFailed" && hooks[i].HasPolicy(charts.HookFailed) {
				e.deleteLateHook(dctx, rec, hooks[i])
			}
			e.deleteHooks(dctx, rec, hooks[:i], charts.HookSucceeded)
			cancel()
			return runs, err
		}
	}
	slices.Reverse(hooks)
	e.deleteHooks(ctx, rec, hooks, charts.HookSucceeded)
	return runs, nil
}

// runHook runs one hook.
func (e *Engine) runHook(ctx context.Context, rec *storage.Release, h charts.Hook, event charts.HookEvent, timeout time.Duration) (HookRun, error) {
	ref := charts.RefIn(h.Object, e.Namespace())
	kind, name := h.Object.GetKind(), h.Object.GetName()
	run := HookRun{Name: name, Kind: kind, Event: event, StartedAt: storage.Stamp(e.clock())}
	fail := func(f *rollout.Diagnosis, err error) (HookRun, error) {
		run.Phase, run.CompletedAt, run.Failure = HookFailed, storage.Stamp(e.clock()), f
		e.emit(rec.Name, rec.Revision, PhaseHook, ref.String(), HookFailed, string(event)+": "+f.Summary())
		return run, &HookError{Name: rec.Name, Revision: rec.Revision, Event: event, Hook: objectName(kind, name), Failure: f, Err: err}
	}
	if h.HasPolicy(charts.HookBeforeHookCreation) {
		if _, err := e.deleteHook(ctx, rec, h); err != nil {
			return fail(&rollout.Diagnosis{Reason: "DeleteFailed", Object: objectName(kind, name), Message: err.Error()}, err)
		}
	}
	if waitsForCompletion(kind) && !h.HasPolicy(charts.HookBeforeHookCreation) {
		// A Job or Pod left by an earlier run would be judged on that
		// run's outcome: Helm refuses to create it again, and so does this.
		switch _, err := e.Objects.Get(ctx, h.Object, e.Namespace()); {
		case err == nil:
			return fail(&rollout.Diagnosis{Reason: "AlreadyExists", Object: objectName(kind, name),
				Message: "it exists from an earlier run; delete it, or give it helm.sh/hook-delete-policy before-hook-creation"}, nil)
		case !apierrors.IsNotFound(err):
			return fail(&rollout.Diagnosis{Reason: "GetFailed", Object: objectName(kind, name), Message: err.Error()}, err)
		}
	}
	e.emit(rec.Name, rec.Revision, PhaseHook, ref.String(), "running", string(event))
	obj := h.Object.DeepCopy()
	if _, err := e.Objects.Apply(ctx, []*unstructured.Unstructured{obj}, cluster.ApplyOptions{Namespace: e.Namespace()}); err != nil {
		return fail(applyFailure(err), err)
	}
	if waitsForCompletion(kind) {
		if e.Waiter == nil {
			return fail(&rollout.Diagnosis{Reason: "Internal", Message: "no waiter configured"}, errors.New("release engine: no waiter configured"))
		}
		wres, werr := e.waitWith(ctx, rec, []*unstructured.Unstructured{obj}, wait.Options{Timeout: timeout})
		if werr != nil {
			f := waitFailure(wres, werr)
			if f.Object == "" {
				f.Object = objectName(kind, name)
			}
			return fail(f, werr)
		}
	}
	run.Phase, run.CompletedAt = HookSucceeded, storage.Stamp(e.clock())
	e.emit(rec.Name, rec.Revision, PhaseHook, ref.String(), HookSucceeded, string(event))
	return run, nil
}

// waitsForCompletion reports whether a hook of kind is waited for, as
// Helm waits for hooks: Jobs and Pods run to completion; other kinds are
// done once applied.
func waitsForCompletion(kind string) bool { return kind == "Job" || kind == "Pod" }

// deleteHooks deletes the hooks whose policies include policy, reporting
// failures as progress (a hook left behind does not change the outcome).
func (e *Engine) deleteHooks(ctx context.Context, rec *storage.Release, hooks []charts.Hook, policy charts.HookDeletePolicy) {
	for _, h := range hooks {
		if !h.HasPolicy(policy) {
			continue
		}
		if res, err := e.deleteHook(ctx, rec, h); err != nil {
			e.emit(rec.Name, rec.Revision, PhaseHook, res.Object.String(), "delete failed", err.Error())
		}
	}
}

// deleteHook deletes a hook's object (never a CRD, as Helm never does) and
// waits until it is gone.
func (e *Engine) deleteHook(ctx context.Context, rec *storage.Release, h charts.Hook) (cluster.PruneResult, error) {
	ref := charts.RefIn(h.Object, e.Namespace())
	if h.Object.GetKind() == "CustomResourceDefinition" {
		return cluster.PruneResult{Object: ref, Action: cluster.PruneKept}, nil
	}
	res, err := e.Objects.Delete(ctx, h.Object, cluster.PruneOptions{Release: rec.Name, Namespace: e.Namespace()})
	if err != nil {
		return cluster.PruneResult{Object: ref}, fmt.Errorf("delete hook %s: %w", ref, err)
	}
	if res.Action == cluster.PruneDeleted {
		e.emit(rec.Name, rec.Revision, PhaseHook, ref.String(), "deleted", "")
	}
	return res, nil
}

// lateApplyWindow is how long deleteLateHook looks for a hook whose apply
// an interrupt cut short.
const lateApplyWindow = 3 * time.Second

// deleteLateHook deletes hook h again if it appears within lateApplyWindow.
// An apply that an interrupt cut short may still land after the first
// delete found nothing: the API server finishes a request whose client has
// gone away.
func (e *Engine) deleteLateHook(ctx context.Context, rec *storage.Release, h charts.Hook) {
	_ = kwait.PollUntilContextTimeout(ctx, lateApplyWindow/12, lateApplyWindow, true, func(ctx context.Context) (bool, error) {
		_, err := e.Objects.Get(ctx, h.Object, e.Namespace())
		if err == nil {
			e.deleteHooks(ctx, rec, []charts.Hook{h}, charts.HookFailed)
		}
		// Found (now deleted), or an error other than not found: done.
		return !apierrors.IsNotFound(err), nil
	})
}

// hookFailure returns the diagnosis of a failed hook run.
func hookFailure(err error) *rollout.Diagnosis {
	var he *HookError
	if errors.As(err, &he) && he.Failure != nil {
		return he.Failure
	}
	return &rollout.Diagnosis{Reason: "HookFailed", Message: err.Error()}
}
