// scenarios_upgrade.go holds scenarios 1 and 2: healthy upgrades, crash-looping and OOM-killed upgrades.

package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// healthy: scenario 1, the healthy upgrade by every tool, then two
// variations of it measured with vllmctl alone.
func (b *bench) healthy(ctx context.Context) error {
	values := b.file("values.yaml")
	if err := b.healthyUpgrade(ctx, values); err != nil {
		return err
	}
	if err := b.rolloutDuration(ctx, values); err != nil {
		return err
	}
	return b.revisionCount(ctx, values)
}

// healthyUpgrade: each tool upgrades a 3-replica release to a new image
// tag.
func (b *bench) healthyUpgrade(ctx context.Context, values string) error {
	s := newScenario("healthy-upgrade",
		"upgrade of a 3-replica release to a new image tag (1 GPU, ready delay 2s, maxSurge 1/maxUnavailable 0); "+
			"kubectl = apply --server-side + rollout status, helm = upgrade --install --wait",
		"vllmctl", "kubectl", "helm")
	for i := 1; i <= b.o.runs; i++ {
		for _, tool := range s.tools {
			r, err := b.attempt(ctx, s.name, func() (run, error) {
				return b.fresh(ctx, "up-"+tool, func(ns string) (run, error) {
					if err := b.install(ctx, tool, ns, values); err != nil {
						return run{}, err
					}
					r, err := b.upgrade(ctx, tool, ns, values, "image.tag="+newTag)
					if err == nil {
						err = b.rolledOut(ctx, ns, newTag)
					}
					return r, err
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

// rolloutDuration: vllmctl alone, a 1-replica rollout taking 10 s vs 60 s
// (the ready delay of the new pod).
func (b *bench) rolloutDuration(ctx context.Context, values string) error {
	s := newScenario("vllmctl-rollout-duration",
		"vllmctl deploy of a 1-replica upgrade whose new pod is Ready after 10 s vs 60 s: requests against rollout time",
		"rollout-10s", "rollout-60s")
	runs := b.o.runs
	if b.o.quick {
		runs = 1
	}
	for i := 1; i <= runs; i++ {
		for _, tool := range s.tools {
			delay := strings.TrimPrefix(tool, "rollout-")
			r, err := b.attempt(ctx, s.name, func() (run, error) {
				return b.fresh(ctx, "dur", func(ns string) (run, error) {
					if err := b.install(ctx, "vllmctl", ns, values, "replicaCount=1", setDelay+"1s"); err != nil {
						return run{}, err
					}
					r, err := b.upgrade(ctx, "vllmctl", ns, values, "replicaCount=1", setDelay+delay, "image.tag="+newTag)
					if err == nil {
						err = b.rolledOut(ctx, ns, newTag)
					}
					return r, err
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

// revisionCount: vllmctl alone, the healthy upgrade at revision 2 vs
// revision 20 (18 cheap upgrades first, changing a Service annotation: no
// rollout).
func (b *bench) revisionCount(ctx context.Context, values string) error {
	s := newScenario("vllmctl-revision",
		"vllmctl deploy of the healthy upgrade as revision 2 vs revision 20 (history-max 10): requests against history length",
		"revision-2", "revision-20")
	for i := 1; i <= b.o.runs; i++ {
		for _, tool := range s.tools {
			want, _ := strconv.Atoi(strings.TrimPrefix(tool, "revision-"))
			r, err := b.attempt(ctx, s.name, func() (run, error) {
				return b.fresh(ctx, "rev", func(ns string) (run, error) {
					if err := b.install(ctx, "vllmctl", ns, values); err != nil {
						return run{}, err
					}
					for rev := 2; rev < want; rev++ {
						if err := b.setup(ctx, b.vllmctlDeploy(ns, values, fmt.Sprintf("service.annotations.bench\\.vllmctl\\.io/rev=r%d", rev))); err != nil {
							return run{}, err
						}
					}
					// The measured upgrade keeps the last Service annotation.
					set := []string{"image.tag=" + newTag}
					if want > 2 {
						set = append(set, fmt.Sprintf("service.annotations.bench\\.vllmctl\\.io/rev=r%d", want-1))
					}
					r, err := b.upgrade(ctx, "vllmctl", ns, values, set...)
					if err != nil {
						return r, err
					}
					d, err := parseResult(r.stdout)
					if err == nil && d.Revision != want {
						err = fmt.Errorf("deployed revision %d, want %d", d.Revision, want)
					}
					return r, err
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

// failure: scenario 2, a crash-looping and an OOM-killed upgrade.
func (b *bench) failure(ctx context.Context) error {
	values := b.file("values.yaml")
	for _, fault := range []string{"crash", "oom"} {
		tag := newTag + "-" + fault
		s := newScenario(fault+"-upgrade",
			fmt.Sprintf("upgrade of the 3-replica release to image tag %s, start to exit: vllmctl deploy (exit 3, rolled back) "+
				"vs helm upgrade --rollback-on-failure --timeout 60s (one run)", tag),
			"vllmctl", "helm")
		for i := 1; i <= b.o.runs; i++ {
			for _, tool := range s.tools {
				if tool == "helm" && i > 1 {
					continue
				}
				r, err := b.attempt(ctx, s.name, func() (run, error) {
					return b.fresh(ctx, fault+"-"+tool, func(ns string) (run, error) {
						if err := b.install(ctx, tool, ns, values); err != nil {
							return run{}, err
						}
						var r run
						var err error
						if tool == "helm" {
							// Helm exits 1 after its timeout and rollback.
							r, err = b.measure(ctx, b.helmUpgrade(ns, values,
								[]string{"--rollback-on-failure", "--timeout", "60s"}, "image.tag="+tag).expect(1))
						} else {
							r, err = b.measure(ctx, b.vllmctlDeploy(ns, values, "image.tag="+tag).expect(3))
							if err == nil {
								var d deployResult
								if d, err = parseResult(r.stdout); err == nil && d.RolledBackTo != 1 {
									err = fmt.Errorf("rolled back to revision %d, want 1", d.RolledBackTo)
								}
							}
						}
						if err == nil {
							err = b.rolledOut(ctx, ns, goodTag)
						}
						return r, err
					})
				})
				if ctx.Err() != nil {
					return ctx.Err()
				}
				b.add(s, tool, r, err)
			}
		}
		b.finish(s)
	}
	return nil
}
