package release

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/storage"
)

func TestWaitDrift(t *testing.T) {
	rec := &storage.Release{Revision: 3, ReplicaSets: []storage.ReplicaSetRef{{Deployment: "chat", Name: "chat-aaa", PodTemplateHash: "aaa", Revision: 3}},
		ControllerRevisions: []storage.ControllerRevisionRef{{StatefulSet: "chat-g0", Name: "chat-g0-ccc", Hash: "ccc", Revision: 2}}}
	sts := object.Ref{Group: "apps", Version: "v1", Kind: "StatefulSet", Namespace: "ml", Name: "chat-g0"}
	dep := object.Ref{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "ml", Name: "chat"}
	tests := []struct {
		name string
		ev   rollout.Event
		want string
	}{
		{"no rollout progress", rollout.Event{Object: dep}, ""},
		{"new ReplicaSet not known yet", rollout.Event{Object: dep, Rollout: &rollout.RolloutProgress{Deployment: "chat"}}, ""},
		{"the recorded ReplicaSet", rollout.Event{Object: dep, Rollout: &rollout.RolloutProgress{NewReplicaSet: "chat-aaa", PodTemplateHash: "aaa"}}, ""},
		{"another Deployment", rollout.Event{Object: object.Ref{Kind: "Deployment", Name: "other"},
			Rollout: &rollout.RolloutProgress{NewReplicaSet: "other-bbb", PodTemplateHash: "bbb"}}, ""},
		{"changed outside vllmctl", rollout.Event{Object: dep, Rollout: &rollout.RolloutProgress{NewReplicaSet: "chat-bbb", PodTemplateHash: "bbb"}},
			"rolling out ReplicaSet chat-bbb (pod-template-hash bbb), not revision 3's chat-aaa (pod-template-hash aaa): the pod template was changed outside vllmctl"},
		{"the recorded ControllerRevision", rollout.Event{Object: sts, Rollout: &rollout.RolloutProgress{StatefulSet: "chat-g0", UpdateRevision: "chat-g0-ccc"}}, ""},
		{"a StatefulSet not recorded", rollout.Event{Object: sts, Rollout: &rollout.RolloutProgress{StatefulSet: "chat-g9", UpdateRevision: "chat-g9-ddd"}}, ""},
		{"StatefulSet changed outside vllmctl", rollout.Event{Object: sts, Rollout: &rollout.RolloutProgress{StatefulSet: "chat-g0", UpdateRevision: "chat-g0-ddd"}},
			"rolling out ControllerRevision chat-g0-ddd, not revision 3's chat-g0-ccc (hash ccc): the pod template was changed outside vllmctl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, drift(rec, tt.ev))
		})
	}
}
