//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
	"github.com/vllmctl/vllmctl/wait"
)

// hookJob is a Job of the shape of a Helm hook: one container, image,
// restartPolicy policy, backoffLimit 6.
func hookJob(name, image string, policy corev1.RestartPolicy) *batchv1.Job {
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](6),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: policy,
				Containers:    []corev1.Container{{Name: "migrate", Image: image}},
			}},
		},
	}
}

// createRun creates obj (a Job or a Pod) in the fixture's namespace and
// returns it as the watcher takes it.
func (f *watcherFixture) createRun(t *testing.T, ctx context.Context, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	var err error
	switch o := obj.(type) {
	case *batchv1.Job:
		_, err = f.client.BatchV1().Jobs(f.namespace).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.Pod:
		_, err = f.client.CoreV1().Pods(f.namespace).Create(ctx, o, metav1.CreateOptions{})
	}
	require.NoError(t, err)
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	require.NoError(t, err)
	return &unstructured.Unstructured{Object: m}
}

// TestRolloutWatcherJobsAndPods: the watcher waits for a Job and a bare
// Pod to run to completion (the simulation's completion stages), and a
// crash-looping Job's pod fails the wait long before the Job's
// backoffLimit is spent.
func TestRolloutWatcherJobsAndPods(t *testing.T) {
	shareCluster(t, 4)
	f := newWatcherFixture(t, wait.RolloutOptions{})
	ctx := context.Background()

	t.Run("a Job and a Pod complete", func(t *testing.T) {
		job := f.createRun(t, ctx, hookJob("migrate", "example.com/migrate:v1", corev1.RestartPolicyNever))
		pod := f.createRun(t, ctx, &corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: "chat-test"},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyOnFailure,
				Containers: []corev1.Container{{Name: "test", Image: "example.com/test:v1"}}},
		})
		r := f.watchObjects(t, ctx, []*unstructured.Unstructured{job, pod}, 60*time.Second)
		require.NoError(t, r.err)
		assert.Equal(t, wait.OutcomeCurrent, r.res.Outcome)
		require.Len(t, r.res.Objects, 2)
		assert.Equal(t, "job completed: 1 succeeded", r.res.Objects[0].Message)
		assert.Equal(t, "pod succeeded", r.res.Objects[1].Message)
		p, err := f.client.CoreV1().Pods(f.namespace).Get(ctx, "chat-test", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, corev1.PodSucceeded, p.Status.Phase)
	})

	t.Run("a crash-looping Job fails fast", func(t *testing.T) {
		job := f.createRun(t, ctx, hookJob("migrate-crash", "example.com/migrate-crash:v1", corev1.RestartPolicyOnFailure))
		start := time.Now()
		r := f.watchObjects(t, ctx, []*unstructured.Unstructured{job}, 90*time.Second)
		elapsed := time.Since(start)
		require.Error(t, r.err)
		require.ErrorIs(t, r.err, wait.ErrFailed)
		assert.Equal(t, wait.OutcomeFailed, r.res.Outcome)
		d := r.res.Diagnosis
		require.NotNil(t, d)
		assert.Equal(t, rollout.VerdictCrashLoop, d.Verdict)
		assert.Equal(t, "job.batch/migrate-crash", d.Object)
		assert.Contains(t, d.Pod, "migrate-crash-")
		assert.Equal(t, "migrate", d.Container)
		assert.Equal(t, int32(1), d.ExitCode)
		assert.NotEmpty(t, d.LogTail)
		assert.Less(t, elapsed, 30*time.Second, "fails fast")

		j, err := f.client.BatchV1().Jobs(f.namespace).Get(ctx, "migrate-crash", metav1.GetOptions{})
		require.NoError(t, err)
		for _, c := range j.Status.Conditions {
			assert.False(t, c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue, "the wait failed before the Job's backoffLimit was spent")
		}
	})

	t.Run("a Job whose pod's first crash names a decisive cause fails at that crash", func(t *testing.T) {
		for _, policy := range []corev1.RestartPolicy{corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever} {
			name := "migrate-gpumem-" + strings.ToLower(string(policy))
			job := f.createRun(t, ctx, hookJob(name, "example.com/migrate:v1-fault-gpumem", policy))
			r := f.watchObjects(t, ctx, []*unstructured.Unstructured{job}, 90*time.Second)
			require.ErrorIs(t, r.err, wait.ErrFailed, "%s", policy)
			d := r.res.Diagnosis
			require.NotNil(t, d)
			assert.Equal(t, rollout.VerdictKnownCause, d.Verdict, "%s", policy)
			assert.Equal(t, vllmcause.CauseGPUOOM, d.Cause, "%s", policy)
			assert.Contains(t, d.Evidence, "CUDA out of memory")
			assert.LessOrEqual(t, d.RestartCount, int32(1), "%s: failed at the first crash", policy)
			assert.Equal(t, "job.batch/"+name, d.Object)
		}
	})
}
