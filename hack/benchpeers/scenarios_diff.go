// scenarios_diff.go holds scenario 3: diff of an unchanged release, install of a one-ConfigMap chart.

package main

import "context"

// diffAndConfigMap: scenario 3.
func (b *bench) diffAndConfigMap(ctx context.Context) error {
	values := b.file("values.yaml")
	s := newScenario("diff-unchanged",
		"diff of an unchanged 3-replica release: vllmctl diff vs kubectl diff --server-side (of the vllmctl template output)",
		"vllmctl", "kubectl")
	nsV, err := b.namespace(ctx, "diff-vllmctl")
	if err != nil {
		return err
	}
	nsK, err := b.namespace(ctx, "diff-kubectl")
	if err != nil {
		return err
	}
	if err := b.install(ctx, "vllmctl", nsV, values); err != nil {
		return err
	}
	if err := b.install(ctx, "kubectl", nsK, values); err != nil {
		return err
	}
	rendered, err := b.render(ctx, nsK, values)
	if err != nil {
		return err
	}
	for i := 1; i <= b.o.runs; i++ {
		for _, tool := range s.tools {
			r, err := b.attempt(ctx, s.name, func() (run, error) {
				if tool == "kubectl" {
					return b.measure(ctx, cmd(b.o.kubectl, "diff", "--server-side", "--field-manager", "kubectl", "-n", nsK, "-f", rendered))
				}
				return b.measure(ctx, cmd(b.o.vllmctl, "diff", release, b.o.chart, "-n", nsV, "-f", values))
			})
			if ctx.Err() != nil {
				return ctx.Err()
			}
			b.add(s, tool, r, err)
		}
	}
	b.finish(s)
	for _, ns := range []string{nsV, nsK} {
		if err := b.deleteNamespace(ctx, ns); err != nil {
			return err
		}
	}

	chart := b.file("cm")
	s = newScenario("configmap-install",
		"install of a one-ConfigMap chart in a fresh namespace: vllmctl deploy vs helm install", "vllmctl", "helm")
	for i := 1; i <= b.o.runs; i++ {
		for _, tool := range s.tools {
			r, err := b.attempt(ctx, s.name, func() (run, error) {
				return b.fresh(ctx, "cm-"+tool, func(ns string) (run, error) {
					if tool == "helm" {
						return b.measure(ctx, cmd(b.o.helm, "install", "cm", chart, "-n", ns))
					}
					return b.measure(ctx, cmd(b.o.vllmctl, "deploy", "cm", chart, "-n", ns, "-o", "json"))
				})
			})
			if ctx.Err() != nil {
				return ctx.Err()
			}
			b.add(s, tool, r, err)
		}
	}
	b.finish(s)
	return nil
}
