package charts

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// crdGVK is the only kind a crds/ file may hold.
var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// parseCRDs parses the crds/ files of ch and of the subcharts it renders
// (Helm's CRDObjects, so call it on the chart after dependency
// processing), as written: they are not templates. Every document must be
// an apiextensions.k8s.io/v1 CustomResourceDefinition; anything else is an
// *InputError naming the file. The CRDs come back sorted by name; a CRD
// defined twice (say by a chart and its subchart) is kept once, the first
// one in Helm's order (the one `helm install` creates), with a warning
// when the two differ.
func parseCRDs(ch *chart.Chart) ([]*unstructured.Unstructured, []string, error) {
	var out []*unstructured.Unstructured
	var warnings []string
	from := map[string]string{} // CRD name -> file
	for _, crd := range ch.CRDObjects() {
		content := string(crd.File.Data)
		for i, doc := range splitDocuments(content) {
			n := i + 1
			objs, err := parseDocument(doc)
			if err == nil {
				err = checkCRDs(objs)
			}
			if err != nil {
				return nil, nil, &InputError{Source: "CRD file", File: crd.Filename, Err: err,
					Msg: fmt.Sprintf("document %d: %v", n, err)}
			}
			for _, o := range objs {
				if prev, dup := from[o.GetName()]; dup {
					if i := slices.IndexFunc(out, func(p *unstructured.Unstructured) bool { return p.GetName() == o.GetName() }); !reflect.DeepEqual(out[i].Object, o.Object) {
						warnings = append(warnings, fmt.Sprintf("CRD %s is defined by %s and, differently, by %s: using the first one",
							o.GetName(), prev, crd.Filename))
					}
					continue
				}
				from[o.GetName()] = crd.Filename
				out = append(out, o)
			}
		}
	}
	slices.SortFunc(out, func(a, b *unstructured.Unstructured) int { return cmp.Compare(a.GetName(), b.GetName()) })
	return out, warnings, nil
}

// checkCRDs refuses objects of a crds/ file that are not CRDs.
func checkCRDs(objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		if gvk := o.GroupVersionKind(); gvk != crdGVK {
			return fmt.Errorf("%s %s is not a CustomResourceDefinition of %s (crds/ holds only CRDs, as written; templates go in templates/)",
				o.GetAPIVersion()+" "+o.GetKind(), o.GetName(), crdGVK.GroupVersion())
		}
	}
	return nil
}
