package charts

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const (
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
	SetFile     []string // --set-file key=path: the file's content, a string
	SetJSON     []string // --set-json key=JSON, or a JSON object
	SetLiteral  []string // --set-literal key=value: value as is, a string
	// ReuseValues, ResetThenReuseValues and ResetValues are Helm's
	// upgrade flags: how the values combine with Previous (see
	// reuseValues). ResetValues wins over the others, ReuseValues over
	// ResetThenReuseValues.
	ReuseValues          bool
	ResetThenReuseValues bool
	ResetValues          bool
	// Previous are the values of the release's current revision, set by
	// the release engine for an upgrade (nil: none, a first install).
	Previous  *PreviousValues
	IsUpgrade bool // .Release.IsUpgrade / IsInstall
	Revision  int  // .Release.Revision (1 when unknown)
	// KubeVersion is .Capabilities.KubeVersion (e.g. "v1.37.2", the
	// server's version when known); empty means DefaultKubeVersion, as
	// `helm template` does without --kube-version.
	KubeVersion string
	// APIVersions are added to .Capabilities.APIVersions of a render
	// without a cluster (helm template's --api-versions/-a); a render
	// for a cluster takes the cluster's (Cluster).
	APIVersions []string
	// Cluster, when set, makes the render one for that cluster, as `helm
	// upgrade` renders: its API versions and its lookup (see Cluster).
	// Nil is `helm template`'s offline render.
	Cluster *Cluster
	// PostRenderer, when set, runs over the rendered objects and hooks
	// before they are parsed and marked as the release's (see
	// PostRenderer).
	PostRenderer *PostRenderer
	// LearnSecrets, when set, is told the values of the rendered Secrets
	// (secretdata.Values) when a post-renderer fails, before its error is
	// returned: that error quotes what the post-renderer printed, which
	// may echo its input, and the caller's one redaction (diff.Redactor,
	// where output leaves the program) must know them. Without it the
	// error quotes the post-renderer as is, as Helm's does.
	LearnSecrets func(values ...string)
	// SkipKubeVersionCheck skips the chart's kubeVersion constraint: for a
	// render that only validates the input before the server's version is
	// known (the constraint is checked by the render that counts).
	SkipKubeVersionCheck bool
	// ChartDir is the directory the chart was loaded from, if any. It is
	// only used in messages: the command that vendors a missing
	// dependency names it ("CHART" when empty).
	ChartDir string
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
	// UserValues are the values the user supplied (files, --set and the
	// other values flags, over the previous revision's with --reuse-values
	// or --reset-then-reuse-values), not
	// the chart defaults: this is what a release record stores.
	UserValues map[string]any
	// Values are the fully coalesced values the templates saw.
	Values map[string]any
	// Objects are the rendered objects, labelled and sorted (see
	// SortObjects), without the hooks.
	Objects []*unstructured.Unstructured
	// Hooks are the objects annotated helm.sh/hook, marked like Objects, in
	// Helm's order of hooks (by kind, in install order). They are not part
	// of Objects or Manifest.
	Hooks []Hook
	// Sources maps each object (by SourceKey) to the template that
	// rendered it, as Helm names it: "<chart>/templates/x.yaml", or
	// "<chart>/charts/<subchart>/templates/x.yaml" for a subchart's. Use
	// Source to look an object up.
	Sources map[string]string
	// Manifest is Objects as one YAML stream ("---" separated), in order.
	Manifest string
	// Notes is the rendered NOTES.txt, if the chart has one.
	Notes string
	// CRDs are the CustomResourceDefinitions of the crds/ directories of
	// the chart and of its enabled subcharts (Helm's CRDObjects), parsed as
	// written (not templated, not labelled), sorted by name. They are not
	// part of Objects or Manifest: a deploy creates them (create-only)
	// before anything else; `template --include-crds` prints them.
	CRDs []*unstructured.Unstructured
	// Warnings are notes for stderr about the render (e.g. a dependency
	// left out because it is disabled and not vendored), one line each.
	Warnings []string
}
