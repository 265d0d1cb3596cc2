package release

import "github.com/vllmctl/vllmctl/wait"

// warnStartup warns, before anything is applied, about every Deployment
// whose pods may take longer to become Ready than the deploy's timeout
// allows (the startup probe's budget plus the readiness delay): such a
// rollout times out while the pods are still loading their weights.
func (d *Deployer) warnStartup(p *deployPlan) {
	for _, w := range p.renderWarnings {
		d.emit(p.opts.Name, 0, PhaseRender, "", "warning", w)
	}
	for _, w := range wait.StartupWarnings(p.objs, p.opts.Timeout) {
		d.emit(p.opts.Name, 0, PhasePreflight, "", "warning", w)
	}
}
