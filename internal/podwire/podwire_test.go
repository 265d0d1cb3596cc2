package podwire

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
)

// FullPod is a pod with a bit of everything.
func fullPod(name string) *corev1.Pod {
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health"}}, FailureThreshold: 180, PeriodSeconds: 10}
	res := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}, Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns", UID: "uid-" + "name", ResourceVersion: "42",
			Labels:          map[string]string{"app": "chat"},
			Annotations:     map[string]string{"sim.vllmctl.io/ready-delay": "1s"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "chat-abc", UID: "rs", Controller: ptr.To(true)}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{}}`)}}},
		},
		Spec: corev1.PodSpec{
			NodeName:       "gpu-node-1",
			Volumes:        []corev1.Volume{{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}},
			InitContainers: []corev1.Container{{Name: "fetch", Image: "busybox", Args: []string{"true"}, Resources: res, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}},
			Containers: []corev1.Container{{
				Name: "server", Image: "vllm/vllm-openai:v0.11.0", Args: []string{"--model", "m"},
				Env:            []corev1.EnvVar{{Name: "HF_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "token"}}}},
				Resources:      res,
				StartupProbe:   probe,
				ReadinessProbe: probe,
			}},
			Tolerations:    []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}},
			NodeSelector:   map[string]string{"pool": "a100"},
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "x"}},
			Overhead:       corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "server", RestartCount: 2,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}},
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

func decoderOf(t *testing.T, f Filter) decoder {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(newSerializer(f).SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	require.True(t, ok)
	return info.Serializer.(decoder)
}

// TestFilters: each filter keeps exactly what its reader reads.
func TestFilters(t *testing.T) {
	pod := fullPod("chat-abc-1")
	watched := &corev1.Pod{ObjectMeta: *pod.ObjectMeta.DeepCopy(), Status: *pod.Status.DeepCopy(), Spec: corev1.PodSpec{
		NodeName:       "gpu-node-1",
		InitContainers: []corev1.Container{{Name: "fetch"}},
		Containers:     []corev1.Container{{Name: "server", StartupProbe: pod.Spec.Containers[0].StartupProbe}},
	}}
	watched.ManagedFields = nil
	requests := &corev1.Pod{ObjectMeta: *watched.ObjectMeta.DeepCopy(), Status: corev1.PodStatus{Phase: corev1.PodRunning}, Spec: *pod.Spec.DeepCopy()}
	requests.Spec.Volumes, requests.Spec.ReadinessGates = nil, nil
	requests.Spec.InitContainers = []corev1.Container{{Name: "fetch", Image: "busybox", Resources: pod.Spec.InitContainers[0].Resources, RestartPolicy: pod.Spec.InitContainers[0].RestartPolicy}}
	requests.Spec.Containers = []corev1.Container{{Name: "server", Image: "vllm/vllm-openai:v0.11.0", Resources: pod.Spec.Containers[0].Resources}}
	for _, tc := range []struct {
		name string
		f    Filter
		want *corev1.Pod
	}{{"Watched", Watched, watched}, {"Requests", Requests, requests}} {
		t.Run(tc.name, func(t *testing.T) {
			dec := decoderOf(t, tc.f)
			data := protobufOf(t, pod)
			_, _, raw, ok := unwrapProtobuf(data)
			require.True(t, ok)
			slim, err := appendFiltered(nil, raw, tc.f)
			require.NoError(t, err)
			assert.Less(t, len(slim), len(raw)*3/4)
			n, err := filteredSize(raw, tc.f)
			require.NoError(t, err)
			assert.Equal(t, len(slim), n)
			for _, into := range []runtime.Object{nil, &corev1.Pod{Spec: corev1.PodSpec{Hostname: "stale"}}} {
				got, gvk, ok := dec.decodeSlim(data, into)
				require.True(t, ok)
				assert.Equal(t, "Pod", gvk.Kind)
				gp := got.(*corev1.Pod)
				gp.TypeMeta = metav1.TypeMeta{}
				assert.Equal(t, tc.want, gp)
			}

			list := &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, ListMeta: metav1.ListMeta{ResourceVersion: "7", Continue: "next"},
				Items: []corev1.Pod{*pod, *pod}}
			got, _, err := dec.Decode(protobufOf(t, list), nil, &corev1.PodList{})
			require.NoError(t, err)
			gl := got.(*corev1.PodList)
			assert.Equal(t, "next", gl.Continue)
			require.Len(t, gl.Items, 2)
			for i := range gl.Items {
				assert.Equal(t, tc.want, &gl.Items[i])
			}
		})
	}
}

// TestDecoderLeavesTheRest: other kinds, another type to decode into, and
// bytes that do not parse are the protobuf serializer's.
func TestDecoderLeavesTheRest(t *testing.T) {
	dec := decoderOf(t, Watched)
	e := &corev1.Event{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Event"}, ObjectMeta: metav1.ObjectMeta{Name: "e", Annotations: map[string]string{"a": "b"}}, Reason: "BackOff"}
	data := protobufOf(t, e)
	_, _, ok := dec.decodeSlim(data, nil)
	assert.False(t, ok)
	got, _, err := dec.Decode(data, nil, &corev1.Event{})
	require.NoError(t, err)
	assert.Equal(t, "b", got.(*corev1.Event).Annotations["a"])

	pod := protobufOf(t, fullPod("x"))
	for _, bad := range [][]byte{pod[:len(pod)/2], []byte("k8s\x00\xff\xff"), []byte(`{"kind":"Pod"}`), nil} {
		_, _, ok := dec.decodeSlim(bad, nil)
		assert.False(t, ok)
	}
	_, _, ok = dec.decodeSlim(pod, &corev1.Event{})
	assert.False(t, ok, "into another type")
	var nilPod *corev1.Pod
	_, _, ok = dec.decodeSlim(pod, nilPod)
	assert.False(t, ok, "into a nil pod")
}
