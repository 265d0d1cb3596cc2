// scenarios_stuck.go holds scenario 7: the crash-looping upgrade of a
// StatefulSet with the default policies, which a plain undo leaves stuck.

package main

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

const (
	// stuckWait is kubectl's and Helm's wait in the stuck-rollout
	// scenario: Helm's --timeout in the crash-upgrade scenario, and
	// kubectl's rollout status timeout, before and after the undo.
	stuckWait = 60 * time.Second
	// stuckLimit caps the time to recovery, from the upgrade's start:
	// kubectl's two waits take 2 x stuckWait, and the cluster gets one
	// stuckWait more to recover on its own.
	stuckLimit = 3 * stuckWait
	stsGoodTag = "v1"
	stsBadTag  = "v1-crash"
)

// stuck: scenario 7, an upgrade of a StatefulSet (default
// podManagementPolicy OrderedReady, one pod at a time) to a crash-looping
// image. The figure is the time from the upgrade's start to every pod
// serving the old revision again; with kubectl's undo and Helm's
// rollback the crash-looping pod stays on the bad revision
// (kubernetes#67250), which is reported as stuck once stuckLimit passes.
// kubectl and Helm run once (each run waits stuckLimit), vllmctl -runs
// times.
func (b *bench) stuck(ctx context.Context) error {
	s := newScenario("stuck-rollout", fmt.Sprintf(
		"upgrade of a 2-replica StatefulSet (default OrderedReady, %s) to image tag %s, start to every pod Ready on the old revision "+
			"(currentRevision = updateRevision = old), capped at %s: vllmctl deploy (exit 3, rolled back, stuck pods evicted) "+
			"vs kubectl apply --server-side + rollout status --timeout %s + rollout undo + rollout status --timeout %s "+
			"vs helm upgrade --rollback-on-failure --timeout %s (kubectl and helm: one run)",
		"e2e/testdata/stschart", stsBadTag, stuckLimit, stuckWait, stuckWait, stuckWait),
		"vllmctl", "kubectl", "helm")
	s.outcome = true
	for i := 1; i <= b.o.runs; i++ {
		for _, tool := range s.tools {
			if tool != "vllmctl" && i > 1 {
				continue
			}
			r, err := b.attempt(ctx, s.name, func() (run, error) {
				return b.fresh(ctx, "stuck-"+tool, func(ns string) (run, error) {
					return b.stuckRun(ctx, tool, ns)
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

// stuckRun installs the StatefulSet chart with tool, upgrades it to the
// crash-looping tag and measures the time until the old revision serves
// again. A stuck run of kubectl or Helm is the expected outcome, not an
// error; a stuck run of vllmctl is.
func (b *bench) stuckRun(ctx context.Context, tool, ns string) (run, error) {
	if err := b.stsInstall(ctx, tool, ns); err != nil {
		return run{}, err
	}
	sts, err := b.client.AppsV1().StatefulSets(ns).Get(ctx, release, metav1.GetOptions{})
	if err != nil {
		return run{}, err
	}
	old := sts.Status.UpdateRevision
	if old == "" || sts.Status.CurrentRevision != old {
		return run{}, fmt.Errorf("statefulset %s/%s not rolled out after the install: %+v", ns, release, sts.Status)
	}
	steps, err := b.stsUpgrade(ctx, tool, ns)
	if err != nil {
		return run{}, err
	}
	start := time.Now()
	watched := make(chan recovery, 1)
	wctx, cancel := context.WithDeadline(ctx, start.Add(stuckLimit))
	defer cancel()
	exited := make(chan struct{})
	go func() { watched <- b.watchRecovery(wctx, ns, old, exited) }()
	r, err := b.measure(ctx, steps...)
	close(exited)
	r.ToolSeconds = r.Seconds
	rec := <-watched
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	if err != nil {
		return r, err
	}
	if tool == "vllmctl" {
		d, err := parseResult(r.stdout)
		if err == nil && d.RolledBackTo != 1 {
			err = fmt.Errorf("rolled back to revision %d, want 1", d.RolledBackTo)
		}
		if err != nil {
			return r, err
		}
	}
	if !rec.upgraded {
		return r, fmt.Errorf("the upgrade to %s was never seen (statefulset %s/%s)", stsBadTag, ns, release)
	}
	if rec.recovered {
		r.Seconds = rec.at.Sub(start).Seconds()
		r.Outcome = "recovered"
		return r, nil
	}
	r.Seconds, r.Stuck = stuckLimit.Seconds(), true
	r.Outcome = fmt.Sprintf("stuck (not recovered in %s): %s", stuckLimit, rec.state)
	if tool == "vllmctl" {
		return r, fmt.Errorf("%s", r.Outcome)
	}
	return r, nil
}

// stsInstall installs the StatefulSet chart with its good tag (unmeasured).
func (b *bench) stsInstall(ctx context.Context, tool, ns string) error {
	switch tool {
	case "kubectl":
		file, err := b.renderChart(ctx, b.o.stsChart, ns, "--set", "tag="+stsGoodTag)
		if err != nil {
			return err
		}
		return b.setup(ctx,
			cmd(b.o.kubectl, "apply", "--server-side", "-n", ns, "-f", file),
			cmd(b.o.kubectl, "rollout", "status", "statefulset/"+release, "-n", ns, "--timeout", budget.String()))
	case "helm":
		return b.setup(ctx, cmd(b.o.helm, "upgrade", "--install", release, b.o.stsChart, "-n", ns,
			"--wait", "--timeout", budget.String(), "--set", "tag="+stsGoodTag))
	default:
		return b.setup(ctx, b.stsDeploy(ns, "tag="+stsGoodTag))
	}
}

// stsUpgrade is the measured upgrade to the crash-looping tag.
func (b *bench) stsUpgrade(ctx context.Context, tool, ns string) ([]step, error) {
	switch tool {
	case "kubectl":
		file, err := b.renderChart(ctx, b.o.stsChart, ns, "--set", "tag="+stsBadTag)
		if err != nil {
			return nil, err
		}
		status := cmd(b.o.kubectl, "rollout", "status", "statefulset/"+release, "-n", ns, "--timeout", stuckWait.String())
		return []step{
			cmd(b.o.kubectl, "apply", "--server-side", "-n", ns, "-f", file),
			status.expect(1), // times out on the crash-looping pod
			cmd(b.o.kubectl, "rollout", "undo", "statefulset/"+release, "-n", ns),
			status.expect(0, 1), // 1: stuck
		}, nil
	case "helm":
		// Helm exits 1 after its timeout and rollback.
		return []step{cmd(b.o.helm, "upgrade", "--install", release, b.o.stsChart, "-n", ns,
			"--rollback-on-failure", "--timeout", stuckWait.String(), "--set", "tag="+stsBadTag).expect(1)}, nil
	default:
		return []step{b.stsDeploy(ns, "tag="+stsBadTag).expect(3)}, nil
	}
}

func (b *bench) stsDeploy(ns string, set ...string) step {
	argv := []string{b.o.vllmctl, "deploy", release, b.o.stsChart, "-n", ns, "--timeout", budget.String(), "-o", "json"}
	for _, s := range set {
		argv = append(argv, "--set", s)
	}
	return cmd(argv...)
}

// recovery is what watchRecovery saw.
type recovery struct {
	upgraded  bool      // the StatefulSet's update revision left old
	recovered bool      // then came back with every pod on old, Ready
	at        time.Time // when recovered was first seen
	state     string    // the last state seen, when not recovered
}

// watchRecovery polls the release's StatefulSet in ns (direct client, not
// counted) until its update revision has left old and then every pod
// serves old again: all replicas Ready with old's controller-revision-hash
// and currentRevision == updateRevision == old. It returns when recovered
// or when ctx ends. It polls every 250 ms, and at once when exited is
// closed (the tool's last process exited).
func (b *bench) watchRecovery(ctx context.Context, ns, old string, exited <-chan struct{}) recovery {
	var rec recovery
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		sts, err := b.client.AppsV1().StatefulSets(ns).Get(ctx, release, metav1.GetOptions{})
		if err == nil {
			rec.upgraded = rec.upgraded || sts.Status.UpdateRevision != old
			if rec.upgraded {
				ok, state := b.servesRevision(ctx, sts, old)
				if ok {
					rec.recovered, rec.at = true, time.Now()
					return rec
				}
				rec.state = state
			}
		}
		select {
		case <-ctx.Done():
			return rec
		case <-t.C:
		case <-exited:
			exited = nil
		}
	}
}

// servesRevision tells whether every pod of sts is Ready on revision rev,
// and describes the state otherwise.
func (b *bench) servesRevision(ctx context.Context, sts *appsv1.StatefulSet, rev string) (bool, string) {
	want := int32(1)
	if sts.Spec.Replicas != nil {
		want = *sts.Spec.Replicas
	}
	pods, err := b.client.CoreV1().Pods(sts.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(sts.Spec.Selector.MatchLabels).String(),
	})
	if err != nil {
		return false, err.Error()
	}
	var live, ready, onRev int32
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		live++
		if p.Labels[appsv1.ControllerRevisionHashLabelKey] == rev {
			onRev++
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
	}
	st := sts.Status
	ok := st.ObservedGeneration >= sts.Generation && st.CurrentRevision == rev && st.UpdateRevision == rev &&
		live == want && onRev == want && ready == want
	return ok, fmt.Sprintf("%d of %d pod(s) Ready on the old revision, %d pod(s) on another; currentRevision %s, updateRevision %s",
		ready, want, live-onRev, st.CurrentRevision, st.UpdateRevision)
}
