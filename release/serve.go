// The serve check of a revision (wait.CheckServing): once its new pods
// are Ready, and during a canary hold, every pod the release's Services
// select must list the served model and complete one short request,
// through the API server's pod port-forward (package servecheck). Its
// configuration comes from the flags (servecheck.Options) and the chart's
// `serveCheck:` values.

package release

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/servecheck"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// PhaseServe is the progress of a serve check: one event when it starts,
// one per pod, one with its outcome.
const PhaseServe Phase = "serve"

// serveCheckOf is the serve check of revision rec under the engine's
// flags (nil: off, or no way to reach pods).
func (e *Engine) serveCheckOf(rec *storage.Release) (*servecheck.Config, error) {
	if e.PodHTTP == nil {
		return nil, nil
	}
	cfg, err := servecheck.Resolve(rec.Chart, rec.ComputedValues, e.ServeCheck)
	if err != nil {
		return nil, fmt.Errorf("release %s revision %d: %w", rec.Name, rec.Revision, err)
	}
	return cfg, nil
}

// checkServing runs the serve check of rec (when it is on) on the pods of
// scope, keeping rec's lock fresh meanwhile when it holds one, and
// records the report in rec.ServeCheck. It returns the failure
// (VerdictNotServing, or ServeCheckError when the pods could not be
// listed) with its error; a lock lost meanwhile is its
// *storage.ConflictError, without a diagnosis.
func (e *Engine) checkServing(ctx context.Context, rec *storage.Release, objs []*unstructured.Unstructured, scope servecheck.Scope) (*rollout.Diagnosis, error) {
	cfg, err := e.serveCheckOf(rec)
	if err != nil {
		return &rollout.Diagnosis{Reason: "ServeCheckError", Message: err.Error()}, err
	}
	if cfg == nil {
		return nil, nil
	}
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var hb *heartbeat
	if rec.Status.IsPending() {
		hb = e.startHeartbeat(cctx, rec, cancel)
	}
	rep, f, err := e.runServeCheck(cctx, rec, objs, cfg, scope)
	if lost := hb.stop(); lost != nil {
		return nil, lost
	}
	rec.ServeCheck = rep
	if err != nil && f == nil {
		f = &rollout.Diagnosis{Reason: "ServeCheckError", Message: err.Error()}
	}
	return f, err
}

// pods reads the pods of the release namespace (the serve check's and the
// analyses' targets).
func (e *Engine) pods() servecheck.Pods {
	return servecheck.Pods{Client: e.Client, Namespace: e.Namespace()}
}

// runServeCheck runs the serve check cfg on the pods of rec (of scope)
// among objs (servecheck.Checker.Run), its progress as PhaseServe events.
func (e *Engine) runServeCheck(ctx context.Context, rec *storage.Release, objs []*unstructured.Unstructured, cfg *servecheck.Config,
	scope servecheck.Scope) (*rollout.ServeReport, *rollout.Diagnosis, error) {
	c := servecheck.Checker{Pods: e.pods(), HTTP: wait.PodHTTPFunc(e.PodHTTP), Emit: func(object, status, message string) {
		e.emit(rec.Name, rec.Revision, PhaseServe, object, status, message)
	}}
	return c.Run(ctx, rec, objs, cfg, scope)
}
