package wait

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkJudge1000Pods measures what one evaluation of a 1000-replica
// rollout spends per pod: the verdict on every pod of the new ReplicaSet
// and its phase for the progress (half of them Ready, a tenth scheduled
// but not started, the rest running and not Ready yet).
func BenchmarkJudge1000Pods(b *testing.B) {
	d := testDeployment("vllm/vllm-openai:v0.9.1")
	rs := testReplicaSet(d, "new", "vllm/vllm-openai:v0.9.1", 1000)
	pods := make([]*corev1.Pod, 1000)
	for i := range pods {
		p := testPod(rs, fmt.Sprintf("%04d", i), running("vllm", 0))
		p.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
			{Type: corev1.ContainersReady, Status: corev1.ConditionFalse},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse},
		}
		switch {
		case i%2 == 0:
			p.Status.Conditions[2].Status, p.Status.Conditions[3].Status = corev1.ConditionTrue, corev1.ConditionTrue
			p.Status.ContainerStatuses[0].Ready = true
		case i%10 == 1:
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
		}
		p.Status.StartTime = &metav1.Time{Time: t0}
		pods[i] = p
	}
	j := newPodJudge(RolloutOptions{}.withDefaults())
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; b.Loop(); n++ {
		for _, p := range pods {
			if f, _, _ := j.judge(p, n+1, t0); f != nil {
				b.Fatalf("pod %s: unexpected failure %s", p.Name, f.Verdict)
			}
		}
		if ph := podPhases(pods, nil); len(ph) != len(pods) {
			b.Fatalf("%d phases for %d pods", len(ph), len(pods))
		}
	}
}
