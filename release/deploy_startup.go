package release

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/wait"
)

// StartupMargin is what an operation given no --timeout allows beyond the
// start-up budget of its objects (StartupTimeout): scheduling the pods
// and pulling their images, which the startup probe's clock does not
// count.
const StartupMargin = time.Minute

// StartupTimeout is the timeout of an operation on objs when the user
// gave none: the start-up budget of their Deployments (the largest startup
// probe budget plus readiness probe initial delay, wait.StartupBudget)
// plus StartupMargin, never less than DefaultTimeout. The built-in chart's
// budget of 30m makes it 31m.
func StartupTimeout(objs []*unstructured.Unstructured) time.Duration {
	budget := wait.StartupBudget(objs)
	if budget <= 0 {
		return DefaultTimeout
	}
	return max(DefaultTimeout, budget+StartupMargin)
}

// followStartup returns the timeout of an operation on objs given no
// --timeout (StartupTimeout), and says so in the progress when the
// objects' start-up budget raised it above DefaultTimeout: "timeout:
// 31m0s, following the startup probe's budget (no --timeout given)".
func (e *Engine) followStartup(name string, revision int, phase Phase, objs []*unstructured.Unstructured) time.Duration {
	t := StartupTimeout(objs)
	if note := followingNote(t); note != "" {
		e.emit(name, revision, phase, "", "timeout", t.String()+note)
	}
	return t
}

// followingNote follows a timeout an operation given no --timeout took
// from StartupTimeout: why it is longer than DefaultTimeout ("" when it
// is not).
func followingNote(t time.Duration) string {
	if t <= DefaultTimeout {
		return ""
	}
	return ", following the startup probe's budget (no --timeout given)"
}

// warnStartup settles, before anything is applied, the deploy's timeout
// against how long the rendered pods may take to become Ready (the
// startup probe's budget plus the readiness delay). Given no --timeout
// (DeployOptions.Timeout 0), the timeout follows that budget
// (StartupTimeout) and there is nothing to warn about. Given one, it warns
// about every Deployment whose pods may take longer than it allows: such
// a rollout times out while the pods are still loading their weights.
func (e *Engine) warnStartup(p *deployPlan) {
	for _, w := range p.renderWarnings {
		e.emit(p.opts.Name, 0, PhaseRender, "", "warning", w)
	}
	if p.opts.timeoutFollowsStartup {
		p.opts.Timeout = e.followStartup(p.opts.Name, 0, PhasePreflight, p.objs)
		return
	}
	for _, w := range wait.StartupWarnings(p.objs, p.opts.Timeout) {
		e.emit(p.opts.Name, 0, PhasePreflight, "", "warning", w)
	}
}
