package owner

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The keys of a release's objects.
const (
	// LabelManagedBy is the label saying which tool manages an object.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByVllmctl is LabelManagedBy's value on vllmctl's objects.
	ManagedByVllmctl = "vllmctl"
	// LabelRelease names the release an object belongs to.
	LabelRelease = "vllmctl.io/release"
	// AnnotationNamespace names the namespace of that release (its
	// records'), which tells apart releases of the same name in two
	// namespaces sharing a cluster-scoped object.
	AnnotationNamespace = "vllmctl.io/release-namespace"
	// LegacyLabelInstance named the release of objects deployed before
	// LabelRelease; it is read, never written.
	LegacyLabelInstance = "app.kubernetes.io/instance"
)

// Helm's ownership keys, which MarkHelm sets for `vllmctl handover`.
const (
	ManagedByHelm           = "Helm"
	HelmAnnotationName      = "meta.helm.sh/release-name"
	HelmAnnotationNamespace = "meta.helm.sh/release-namespace"
)

// MarkHelm gives obj to Helm release release in namespace, as Helm marks
// the objects it manages: label app.kubernetes.io/managed-by=Helm,
// annotations meta.helm.sh/release-name and release-namespace; vllmctl's
// own keys are removed.
func MarkHelm(obj metav1.Object, release, namespace string) {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelManagedBy] = ManagedByHelm
	delete(labels, LabelRelease)
	obj.SetLabels(labels)
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	delete(annotations, AnnotationNamespace)
	annotations[HelmAnnotationName] = release
	annotations[HelmAnnotationNamespace] = namespace
	obj.SetAnnotations(annotations)
}

// Owner is the release an object belongs to.
type Owner struct {
	Release string
	// Namespace is the release namespace; empty when the object does not
	// say (objects deployed before the annotation).
	Namespace string
	// Legacy is set for an object marked by app.kubernetes.io/instance
	// only (deployed before LabelRelease).
	Legacy bool
}

// String is "release NAME" or "release NAMESPACE/NAME".
func (o Owner) String() string {
	if o.Namespace == "" {
		return "release " + o.Release
	}
	return "release " + o.Namespace + "/" + o.Release
}

// Mark sets the keys of release (in namespace) on obj, keeping its other
// labels and annotations.
func Mark(obj metav1.Object, release, namespace string) {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelManagedBy] = ManagedByVllmctl
	labels[LabelRelease] = release
	obj.SetLabels(labels)
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AnnotationNamespace] = namespace
	obj.SetAnnotations(annotations)
}

// Of returns the vllmctl release obj belongs to, if any.
func Of(obj metav1.Object) (Owner, bool) {
	return of(obj.GetLabels(), obj.GetAnnotations())
}

func of(labels, annotations map[string]string) (Owner, bool) {
	if labels[LabelManagedBy] != ManagedByVllmctl {
		return Owner{}, false
	}
	if r := labels[LabelRelease]; r != "" {
		return Owner{Release: r, Namespace: annotations[AnnotationNamespace]}, true
	}
	if r := labels[LegacyLabelInstance]; r != "" {
		return Owner{Release: r, Namespace: annotations[AnnotationNamespace], Legacy: true}, true
	}
	return Owner{}, false
}

// Owns reports whether obj belongs to release in namespace: it carries
// managed-by=vllmctl and names the release, by LabelRelease or (objects
// deployed before it) by app.kubernetes.io/instance, and names no other
// release namespace.
func Owns(obj metav1.Object, release, namespace string) bool {
	return OwnsKeys(obj.GetLabels(), obj.GetAnnotations(), release, namespace)
}

// OwnsKeys is Owns on an object's labels and annotations.
func OwnsKeys(labels, annotations map[string]string, release, namespace string) bool {
	o, ok := of(labels, annotations)
	return ok && o.Release == release && (o.Namespace == "" || namespace == "" || o.Namespace == namespace)
}

// Describe names who has obj, for messages: its vllmctl release, else its
// field managers, else "not managed by vllmctl".
func Describe(obj metav1.Object) string {
	if o, ok := Of(obj); ok {
		return o.String()
	}
	var managers []string
	for _, m := range obj.GetManagedFields() {
		if m.Manager != "" && !slices.Contains(managers, m.Manager) {
			managers = append(managers, m.Manager)
		}
	}
	if len(managers) == 0 {
		return "not managed by vllmctl"
	}
	return "field managers " + strings.Join(managers, ", ")
}
