package charts

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Labels every rendered object carries.
const (
	LabelManagedBy   = "app.kubernetes.io/managed-by"
	LabelInstance    = "app.kubernetes.io/instance"
	ManagedByVllmctl = "vllmctl"
	// DefaultChart is the built-in chart used when no CHART is given.
	DefaultChart = "vllm"
)

// RenderOptions are the inputs of one render besides the chart itself.
type RenderOptions struct {
	ReleaseName string   // validated as a DNS-1123 label
	Namespace   string   // the release namespace (.Release.Namespace)
	ValueFiles  []string // -f/--values, in order, later wins
	Set         []string // --set, Helm syntax
	SetString   []string // --set-string, Helm syntax
	IsUpgrade   bool     // .Release.IsUpgrade / IsInstall
	Revision    int      // .Release.Revision (1 when unknown)
	// KubeVersion is .Capabilities.KubeVersion (e.g. "v1.37.2", the
	// server's version when known); empty means DefaultKubeVersion, as
	// `helm template` does without --kube-version.
	KubeVersion string
	// SkipKubeVersionCheck skips the chart's kubeVersion constraint: for a
	// render that only validates the input before the server's version is
	// known (the constraint is checked by the render that counts).
	SkipKubeVersionCheck bool
}

// ChartInfo identifies the chart a release was rendered from.
type ChartInfo struct {
	Name       string `json:"name"`
	Version    string `json:"version"`
	AppVersion string `json:"appVersion,omitempty"`
}

// Rendered is the result of rendering a chart.
type Rendered struct {
	Chart ChartInfo
	// UserValues are the values the user supplied (files then --set), not
	// the chart defaults: this is what a release record stores.
	UserValues map[string]any
	// Values are the fully coalesced values the templates saw.
	Values map[string]any
	// Objects are the rendered objects, labelled and sorted (see SortObjects).
	Objects []*unstructured.Unstructured
	// Manifest is Objects as one YAML stream ("---" separated), in order.
	Manifest string
	// Notes is the rendered NOTES.txt, if the chart has one.
	Notes string
}
