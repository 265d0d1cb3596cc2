// Package object holds the one reference to a Kubernetes object that every
// package of vllmctl uses: the watcher's events, the diff's rows, the
// preflight's messages, the applier's results and the release's JSON. It
// builds on cli-utils' object.ObjMetadata (group, kind, namespace, name),
// which is an object's identity, and keeps the version beside it because
// the output names objects the way kubectl's manifests do ("apps/v1
// Deployment ns/name").
package object

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clobject "sigs.k8s.io/cli-utils/pkg/object"
)

// Ref names a Kubernetes object. Its identity, for pruning and comparison,
// is group, kind, namespace and name ([Ref.ID]); the version only says
// which version the object was written in.
type Ref struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version,omitempty"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// ID is an object's identity: cli-utils' ObjMetadata (group, kind,
// namespace and name). It is comparable, so it keys maps and sets.
type ID = clobject.ObjMetadata

// RefOf returns the reference of obj as it stands (its namespace is not
// defaulted).
func RefOf(obj *unstructured.Unstructured) Ref {
	gvk := obj.GroupVersionKind()
	return Ref{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// ID returns the object's identity, without the version.
func (r Ref) ID() ID {
	return ID{GroupKind: r.GroupKind(), Namespace: r.Namespace, Name: r.Name}
}

// APIVersion returns group/version, or the version alone for the core group.
func (r Ref) APIVersion() string {
	return schema.GroupVersion{Group: r.Group, Version: r.Version}.String()
}

// GroupKind returns the object's group and kind.
func (r Ref) GroupKind() schema.GroupKind {
	return schema.GroupKind{Group: r.Group, Kind: r.Kind}
}

// GroupVersionKind returns the object's group, version and kind.
func (r Ref) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
}

// Is reports whether the object is of group and kind.
func (r Ref) Is(group, kind string) bool { return r.Group == group && r.Kind == kind }

// IsDeployment reports whether the object is an apps Deployment.
func (r Ref) IsDeployment() bool { return r.Is("apps", "Deployment") }

// IsHPA reports whether the object is a HorizontalPodAutoscaler.
func (r Ref) IsHPA() bool { return r.Is("autoscaling", "HorizontalPodAutoscaler") }

// IsNamespace reports whether the object is a Namespace.
func (r Ref) IsNamespace() bool { return r.Is("", "Namespace") }

// String formats the reference as "apps/v1 Deployment ns/name" ("v1
// Namespace name" for a cluster-scoped object); without a version, as
// "Deployment.apps ns/name".
func (r Ref) String() string {
	name := r.Name
	if r.Namespace != "" {
		name = r.Namespace + "/" + r.Name
	}
	if r.Version == "" {
		return r.GroupKind().String() + " " + name
	}
	return r.APIVersion() + " " + r.Kind + " " + name
}
