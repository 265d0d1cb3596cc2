package wait

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/podwire"
)

// fullPod is a pod with everything slimPod drops.
func fullPod(name string) *corev1.Pod {
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health"}}, FailureThreshold: 180, PeriodSeconds: 10}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns", UID: "uid-" + "name", ResourceVersion: "42",
			Labels:          map[string]string{"app": "chat", podTemplateHashLabel: "abc"},
			Annotations:     map[string]string{"sim.vllmctl.io/ready-delay": "1s"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "chat-abc", UID: "rs", Controller: ptr.To(true)}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{}}`)}}},
		},
		Spec: corev1.PodSpec{
			NodeName:       "gpu-node-1",
			Volumes:        []corev1.Volume{{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}},
			InitContainers: []corev1.Container{{Name: "fetch", Image: "busybox", Args: []string{"true"}}},
			Containers: []corev1.Container{{
				Name: "server", Image: "vllm/vllm-openai:v0.11.0", Args: []string{"--model", "m", "--tensor-parallel-size", "2"},
				Env:            []corev1.EnvVar{{Name: "HF_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "token"}}}},
				Resources:      corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}},
				StartupProbe:   probe,
				ReadinessProbe: probe,
			}},
			Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}},
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "server", RestartCount: 2,
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}},
		},
	}
}

// protobufOf encodes obj as the API server sends it.
func protobufOf(t *testing.T, obj runtime.Object) []byte {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	require.True(t, ok)
	data, err := runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion), obj)
	require.NoError(t, err)
	return data
}

// slimmed is pod as the informers keep it (the transform).
func slimmed(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	out, err := slim(pod.DeepCopy())
	require.NoError(t, err)
	p := out.(*corev1.Pod)
	p.TypeMeta = metav1.TypeMeta{}
	return p
}

// TestPodWatchClientKeepsWhatTheInformersKeep: pods listed through
// NewPodWatchClient (protobuf from an HTTP server, as the API server sends
// them) and then the informers' transform are what the transform keeps of
// the whole pods, so the cut-down decoding changes nothing the verdicts
// read; the spec and managedFields are cut before decoding.
func TestPodWatchClientKeepsWhatTheInformersKeep(t *testing.T) {
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, Items: []corev1.Pod{*fullPod("chat-abc-1"), *fullPod("chat-abc-2")}}
	body := protobufOf(t, list)
	var accept string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accept = r.Header.Get("Accept")
		w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	rc, err := NewPodWatchClient(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	got, err := podwire.Pods{RC: rc, Namespace: "ns"}.List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Contains(t, accept, runtime.ContentTypeProtobuf)
	require.Len(t, got.Items, 2)
	for i := range got.Items {
		assert.Equal(t, slimmed(t, &list.Items[i]), slimmed(t, &got.Items[i]))
		assert.Nil(t, got.Items[i].ManagedFields)
		assert.Empty(t, got.Items[i].Spec.Containers[0].Args, "the spec is cut down before decoding")
	}
}
