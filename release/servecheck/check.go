package servecheck

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// Scope says which pods a serve check takes.
type Scope struct {
	// Pods, when set, are the pods to check, by name (a canary's).
	Pods []string
	// Live takes every Ready pod the Services select, of any revision
	// (`vllmctl test`: what serves now); otherwise only the pods of rec's
	// ReplicaSets and ControllerRevisions.
	Live bool
}

// Checker runs a serve check: the pods it reads, the HTTP it reaches
// them with and the progress it reports.
type Checker struct {
	// Pods reads the pods of the release namespace.
	Pods Pods
	// HTTP opens clients to the pods' ports (the API server's
	// port-forward).
	HTTP wait.PodHTTP
	// Emit reports progress: object ("Pod ns/name", or "" for the check
	// as a whole), status and message.
	Emit func(object, status, message string)
}

// Run runs the serve check cfg on the pods of rec (of scope) among objs,
// reporting progress through Emit, and returns its report and, when a pod
// does not serve, the failure (VerdictNotServing) with an error saying
// so. A failure to find the pods is an error with no diagnosis.
func (c Checker) Run(ctx context.Context, rec *storage.Release, objs []*unstructured.Unstructured, cfg *Config,
	scope Scope) (*rollout.ServeReport, *rollout.Diagnosis, error) {
	targets, owners, err := c.Pods.Targets(ctx, rec, objs, cfg, scope)
	if err != nil {
		return nil, nil, fmt.Errorf("release %s revision %d: serve check: %w", rec.Name, rec.Revision, err)
	}
	model := cfg.Spec.Model
	if model == "" {
		model = "the first model listed"
	}
	if len(targets) == 0 {
		rep := &rollout.ServeReport{Outcome: rollout.ServeSkipped, Reason: "no Ready pod to check", Model: cfg.Spec.Model, Pods: []rollout.ServePod{}}
		c.Emit("", rollout.ServeSkipped, rep.Reason)
		return rep, nil, nil
	}
	c.Emit("", "checking", fmt.Sprintf("%d pod(s): %s on /v1/models and one completion, timeout %s",
		len(targets), model, cfg.Spec.Timeout))
	ns := c.Pods.Namespace
	rep, f := wait.CheckServing(ctx, c.HTTP, ns, targets, cfg.Spec, func(p rollout.ServePod) {
		if p.Outcome == rollout.ServePassed {
			c.Emit("Pod "+ns+"/"+p.Pod, "serving",
				fmt.Sprintf("%s listed, completion %d in %dms", p.Model, p.Status, p.LatencyMs))
			return
		}
		c.Emit("Pod "+ns+"/"+p.Pod, "not serving", p.Message)
	})
	if f == nil && rep.Outcome == rollout.ServeSkipped {
		c.Emit("", rollout.ServeSkipped, rep.Reason)
		return rep, nil, nil
	}
	if f == nil {
		c.Emit("", rollout.ServePassed, fmt.Sprintf("%d pod(s) serve %s", len(rep.Pods), model))
		return rep, nil, nil
	}
	f.Object = owners[f.Pod]
	c.Emit("", rollout.ServeFailed, f.Message)
	return rep, f, errors.New(f.Message) // the rollout's error names the release
}
