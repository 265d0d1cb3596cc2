// scenarios_scale.go holds scenarios 4 and 5: 1000 replicas, and 100 releases in a namespace.

package main

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// large: scenario 4, 1000 replicas on fake CPU-only nodes.
func (b *bench) large(ctx context.Context) error {
	values := b.file("large.yaml")
	// Room for the replicas and the 25% surge, and some slack.
	perNode := 200
	nodes := (b.o.largeReplicas*5/4)/perNode + 2
	progress("adding %d fake nodes for %d replicas", nodes, b.o.largeReplicas)
	if err := b.addNodes(ctx, "bench-large", b.pool+"-large", nodes, corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods: resource.MustParse(strconv.Itoa(perNode)), corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
	}); err != nil {
		return err
	}
	title := fmt.Sprintf("%d replicas without GPUs (ready delay 1s, maxSurge 25%%/maxUnavailable 0) on %d fake nodes; kubectl = apply --server-side + rollout status",
		b.o.largeReplicas, nodes)
	install := newScenario("large-install", "install of "+title, "vllmctl", "kubectl")
	upgrade := newScenario("large-upgrade", "image tag upgrade of "+title, "vllmctl", "kubectl")
	install.resources, upgrade.resources = true, true
	for i := 1; i <= b.o.runs; i++ {
		for _, tool := range install.tools {
			var up run
			var upErr error
			r, err := b.attempt(ctx, install.name, func() (run, error) {
				return b.fresh(ctx, "large-"+tool, func(ns string) (run, error) {
					r, err := b.upgrade(ctx, tool, ns, values)
					if err != nil {
						return r, err
					}
					up, upErr = b.upgrade(ctx, tool, ns, values, "image.tag="+newTag)
					if upErr == nil {
						upErr = b.rolledOut(ctx, ns, newTag)
					}
					return r, nil
				})
			})
			if ctx.Err() != nil {
				return ctx.Err()
			}
			b.add(install, tool, r, err)
			if err == nil {
				b.add(upgrade, tool, up, upErr)
			}
		}
	}
	b.finish(install)
	b.finish(upgrade)
	b.deleteNodes(ctx, b.pool+"-large")
	return nil
}

// manyReleases: scenario 5, list and history in a namespace of 100
// releases.
func (b *bench) manyReleases(ctx context.Context) error {
	const n = 100
	chart := b.file("cm")
	nsV, err := b.namespace(ctx, "rel-vllmctl")
	if err != nil {
		return err
	}
	nsH, err := b.namespace(ctx, "rel-helm")
	if err != nil {
		return err
	}
	progress("installing %d releases with vllmctl and with helm", n)
	if err := b.installReleases(ctx, chart, nsV, nsH, n); err != nil {
		return err
	}
	// r050 gets 3 revisions.
	const name = "r050"
	for v := 2; v <= 3; v++ {
		set := fmt.Sprintf("data.greeting=hello-%d", v)
		if err := b.setup(ctx,
			cmd(b.o.vllmctl, "deploy", name, chart, "-n", nsV, "--set", set, "-o", "json"),
			cmd(b.o.helm, "upgrade", name, chart, "-n", nsH, "--set", set),
		); err != nil {
			return err
		}
	}
	if err := b.listAndHistory(ctx, n, name, nsV, nsH); err != nil {
		return err
	}
	for _, ns := range []string{nsV, nsH} {
		if err := b.deleteNamespace(ctx, ns); err != nil {
			return err
		}
	}
	return nil
}

// installReleases installs n releases r001... of chart with vllmctl in
// nsV and with helm in nsH, two installs at a time (setup only: not
// measured). It returns the first error of each worker.
func (b *bench) installReleases(ctx context.Context, chart, nsV, nsH string, n int) error {
	jobs := make(chan step)
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var first error
			for s := range jobs {
				if err := b.setup(ctx, s); err != nil && first == nil {
					first = err
				}
			}
			errs <- first
		}()
	}
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("r%03d", i)
		jobs <- cmd(b.o.vllmctl, "deploy", name, chart, "-n", nsV, "-o", "json")
		jobs <- cmd(b.o.helm, "install", name, chart, "-n", nsH)
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// listAndHistory measures vllmctl list vs helm list in namespaces of n
// releases (nsV and nsH), and vllmctl history vs helm history of the
// release name there.
func (b *bench) listAndHistory(ctx context.Context, n int, name, nsV, nsH string) error {
	for _, sc := range []struct {
		name, title string
		v, h        []string
	}{
		{"list-100-releases", fmt.Sprintf("list the releases of a namespace holding %d: vllmctl list vs helm list", n),
			[]string{b.o.vllmctl, "list", "-n", nsV}, []string{b.o.helm, "list", "-n", nsH}},
		{"history-100-releases", fmt.Sprintf("history of one release (3 revisions) in a namespace holding %d: vllmctl history vs helm history", n),
			[]string{b.o.vllmctl, "history", name, "-n", nsV}, []string{b.o.helm, "history", name, "-n", nsH}},
	} {
		s := newScenario(sc.name, sc.title, "vllmctl", "helm")
		for i := 1; i <= b.o.runs; i++ {
			for _, tool := range s.tools {
				argv := sc.v
				if tool == "helm" {
					argv = sc.h
				}
				r, err := b.attempt(ctx, s.name, func() (run, error) {
					r, err := b.measure(ctx, cmd(argv...))
					if err == nil && bytes.Count(r.stdout, []byte("\n")) < 2 {
						err = fmt.Errorf("%s printed too little:\n%s", strings.Join(shortArgv(argv), " "), r.stdout)
					}
					return r, err
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
