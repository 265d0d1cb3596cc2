package charts

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vllmctl/vllmctl/internal/object"
	"sigs.k8s.io/yaml"
)

// kindPriority is the position of kind in Helm's install order
// (releaseutil.InstallOrder, the order `helm install` creates objects in);
// every other kind comes after them.
func kindPriority(kind string) int {
	if i, ok := installOrder[kind]; ok {
		return i
	}
	return len(releaseutil.InstallOrder)
}

// installOrder maps the kinds of releaseutil.InstallOrder to their position.
var installOrder = func() map[string]int {
	m := make(map[string]int, len(releaseutil.InstallOrder))
	for i, k := range releaseutil.InstallOrder {
		m[k] = i
	}
	return m
}()

// SortObjects sorts objs in place, deterministically, into apply order,
// Helm's install order: by kind as in releaseutil.InstallOrder
// (PriorityClass, Namespace, NetworkPolicy, ResourceQuota, LimitRange,
// PodSecurityPolicy, PodDisruptionBudget, ServiceAccount, Secret, ...,
// CustomResourceDefinition, ClusterRole, ..., RoleBinding, Service, ...,
// Deployment, HorizontalPodAutoscaler, StatefulSet, Job, CronJob, ...,
// ValidatingWebhookConfiguration), then every other kind, those ordered by
// kind name as Helm does; then by namespace, then by name; apiVersion
// breaks the last ties. Deleting (uninstall, prune) goes in the reverse of
// this order: see SortObjectsForDelete.
func SortObjects(objs []*unstructured.Unstructured) {
	slices.SortStableFunc(objs, compareObjects)
}

// SortObjectsForDelete sorts objs in place into delete order: the reverse
// of SortObjects' apply order.
func SortObjectsForDelete(objs []*unstructured.Unstructured) {
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int { return compareObjects(b, a) })
}

func compareObjects(a, b *unstructured.Unstructured) int {
	pa, pb := kindPriority(a.GetKind()), kindPriority(b.GetKind())
	return cmp.Or(
		cmp.Compare(pa, pb),
		cmp.Compare(a.GetKind(), b.GetKind()),
		cmp.Compare(a.GetNamespace(), b.GetNamespace()),
		cmp.Compare(a.GetName(), b.GetName()),
		cmp.Compare(a.GetAPIVersion(), b.GetAPIVersion()),
	)
}

// Manifest renders objs as one YAML stream, the documents separated by
// "---\n", in the order given. Keys are sorted, so equal objects give equal
// manifests.
func Manifest(objs []*unstructured.Unstructured) (string, error) {
	var b strings.Builder
	for i, o := range objs {
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return "", fmt.Errorf("marshal %s: %w", ObjectRef(o), err)
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(data)
	}
	return b.String(), nil
}

// ObjectRef names an object for messages: "Kind namespace/name", or
// "Kind name" without a namespace.
func ObjectRef(o *unstructured.Unstructured) string {
	if ns := o.GetNamespace(); ns != "" {
		return o.GetKind() + " " + ns + "/" + o.GetName()
	}
	return o.GetKind() + " " + o.GetName()
}

// IsNamespacedKind reports whether objects of gvk live in a namespace,
// from a table of the built-in cluster-scoped kinds. Unknown kinds (custom
// resources) are reported as namespaced; use a RESTMapper when a cluster
// is at hand.
func IsNamespacedKind(gvk schema.GroupVersionKind) bool {
	switch gvk.GroupKind() {
	case schema.GroupKind{Group: "", Kind: "Namespace"},
		schema.GroupKind{Group: "", Kind: "Node"},
		schema.GroupKind{Group: "", Kind: "PersistentVolume"},
		schema.GroupKind{Group: "", Kind: "ComponentStatus"},
		schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"},
		schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"},
		schema.GroupKind{Group: "storage.k8s.io", Kind: "StorageClass"},
		schema.GroupKind{Group: "storage.k8s.io", Kind: "CSIDriver"},
		schema.GroupKind{Group: "storage.k8s.io", Kind: "CSINode"},
		schema.GroupKind{Group: "storage.k8s.io", Kind: "VolumeAttachment"},
		schema.GroupKind{Group: "scheduling.k8s.io", Kind: "PriorityClass"},
		schema.GroupKind{Group: "node.k8s.io", Kind: "RuntimeClass"},
		schema.GroupKind{Group: "networking.k8s.io", Kind: "IngressClass"},
		schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"},
		schema.GroupKind{Group: "apiregistration.k8s.io", Kind: "APIService"},
		schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"},
		schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"},
		schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"},
		schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"},
		schema.GroupKind{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"},
		schema.GroupKind{Group: "flowcontrol.apiserver.k8s.io", Kind: "FlowSchema"},
		schema.GroupKind{Group: "flowcontrol.apiserver.k8s.io", Kind: "PriorityLevelConfiguration"},
		schema.GroupKind{Group: "resource.k8s.io", Kind: "DeviceClass"}:
		return false
	}
	return true
}

// objectHead is what every rendered document must have.
type objectHead struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name         string `json:"name"`
		GenerateName string `json:"generateName"`
	} `json:"metadata"`
	Items json.RawMessage `json:"items"`
}

// SourceKey identifies an object in Rendered.Sources: its group, kind,
// namespace and name as rendered.
func SourceKey(o *unstructured.Unstructured) string {
	return o.GroupVersionKind().GroupKind().String() + " " + o.GetNamespace() + "/" + o.GetName()
}

// Source returns the template that rendered o ("<chart>/templates/x.yaml",
// "<chart>/charts/<sub>/templates/x.yaml"), or "" when o is not one of the
// rendered objects. An object whose namespace was set after rendering
// (by the applier, as kubectl apply -n does) is found too.
func (r *Rendered) Source(o *unstructured.Unstructured) string {
	if r == nil || o == nil {
		return ""
	}
	if s, ok := r.Sources[SourceKey(o)]; ok {
		return s
	}
	return r.Sources[o.GroupVersionKind().GroupKind().String()+" /"+o.GetName()]
}

// parseRendered splits the rendered templates into objects, in file-name
// order then document order (splitDocuments), dropping empty documents,
// and returns the template of every object by SourceKey. A document that
// is not valid YAML or not a Kubernetes object, and a duplicate object,
// are *InputErrors naming the template.
func parseRendered(files map[string]string) ([]*unstructured.Unstructured, map[string]string, error) {
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)

	var objs []*unstructured.Unstructured
	seen := map[string]string{} // SourceKey -> template
	for _, name := range names {
		content := files[name]
		if strings.TrimSpace(content) == "" {
			continue
		}
		// Helm joins the rendered files into one manifest with a newline
		// after each and parses that: a block scalar that ends a file
		// keeps its final line break in what Helm applies, so here too.
		if !strings.HasSuffix(content, "\n") {
			content += "\n"
		}
		for i, doc := range splitDocuments(content) {
			n := i + 1
			got, err := parseDocument(doc)
			if err != nil {
				return nil, nil, &InputError{
					Source: "template", File: name, Err: err,
					Msg: fmt.Sprintf("rendered document %d: %v", n, err),
				}
			}
			for _, o := range got {
				key := SourceKey(o)
				if prev, dup := seen[key]; dup && o.GetName() != "" {
					return nil, nil, &InputError{
						Source: "template", File: name,
						Msg: fmt.Sprintf("%s is rendered twice (also by %s)", ObjectRef(o), prev),
					}
				}
				seen[key] = name
				objs = append(objs, o)
			}
		}
	}
	return objs, seen, nil
}

// splitDocuments splits a file into its non-empty YAML documents, in
// order, as Helm splits the manifest it applies
// (releaseutil.SplitManifests).
func splitDocuments(content string) []string {
	docs := releaseutil.SplitManifests(content)
	keys := slices.Collect(maps.Keys(docs))
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = docs[k]
	}
	return out
}

// parseDocument parses one rendered YAML document into its objects: none
// for a document of only comments, the items of a *List, else one.
func parseDocument(doc string) ([]*unstructured.Unstructured, error) {
	data, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		line, msg := yamlErrorLine(err)
		if line > 0 {
			return nil, fmt.Errorf("invalid YAML at line %d of the rendered document: %s", line, msg)
		}
		return nil, fmt.Errorf("invalid YAML: %s", msg)
	}
	trimmed := strings.TrimSpace(string(data))
	if trimmed == "null" {
		return nil, nil
	}
	if !strings.HasPrefix(trimmed, "{") {
		return nil, fmt.Errorf("not a Kubernetes object (a YAML map with apiVersion, kind and metadata.name): %s", firstLine(doc))
	}
	var head objectHead
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("not a Kubernetes object: %w", err)
	}
	if err := checkHead(head); err != nil {
		return nil, err
	}
	if strings.HasSuffix(head.Kind, "List") && len(head.Items) > 0 {
		list := &unstructured.UnstructuredList{}
		if err := list.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("%s: %w", head.Kind, err)
		}
		out := make([]*unstructured.Unstructured, 0, len(list.Items))
		for i := range list.Items {
			item := &list.Items[i]
			if item.GetAPIVersion() == "" || item.GetKind() == "" || item.GetName() == "" {
				return nil, fmt.Errorf("%s item %d: needs apiVersion, kind and metadata.name", head.Kind, i)
			}
			out = append(out, item)
		}
		return out, nil
	}
	if head.Metadata.Name == "" {
		return nil, fmt.Errorf("%s %s has no metadata.name", head.Kind, orUnnamed(head.Metadata.GenerateName))
	}
	o := &unstructured.Unstructured{}
	if err := o.UnmarshalJSON(data); err != nil {
		return nil, fmt.Errorf("%s %s: %w", head.Kind, head.Metadata.Name, err)
	}
	return []*unstructured.Unstructured{o}, nil
}

func checkHead(h objectHead) error {
	switch {
	case h.APIVersion == "" && h.Kind == "":
		return fmt.Errorf("not a Kubernetes object: apiVersion and kind are not set")
	case h.APIVersion == "":
		return fmt.Errorf("%s %s: apiVersion is not set", h.Kind, h.Metadata.Name)
	case h.Kind == "":
		name := h.Metadata.Name
		if name == "" {
			name = "(unnamed)"
		}
		return fmt.Errorf("object %s: kind is not set", name)
	}
	return nil
}

func orUnnamed(s string) string {
	if s == "" {
		return "(unnamed)"
	}
	return "(generateName " + s + ")"
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " ..."
	}
	if len(s) > 60 {
		s = s[:60] + " ..."
	}
	return fmt.Sprintf("%q", s)
}

// RefIn is obj's reference, in namespace when it names none and its kind
// is namespaced (IsNamespacedKind).
func RefIn(obj *unstructured.Unstructured, namespace string) object.Ref {
	r := object.RefOf(obj)
	if r.Namespace == "" && !IsNamespacedKind(obj.GroupVersionKind()) {
		return r
	}
	if r.Namespace == "" {
		r.Namespace = namespace
	}
	return r
}
