package charts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/vllmctl/vllmctl/internal/owner"
)

// Render-time constants. They reproduce what `helm template` (Helm v4.3.1,
// built against k8s.io/client-go v0.37) puts into .Capabilities, so that a
// chart renders byte-for-byte as with `helm template`.
const (
	// DefaultKubeVersion is .Capabilities.KubeVersion when
	// RenderOptions.KubeVersion is empty: Helm derives it from the
	// client-go it is built with (v0.37 → v1.37.0). Helm's library returns
	// v1.20.0 inside test binaries, which is why it is pinned here.
	DefaultKubeVersion = "v1.37.0"
	// HelmVersion is .Capabilities.HelmVersion.Version.
	HelmVersion = "v4.3.1"
	// maxReleaseNameLen is Helm's limit on release names.
	maxReleaseNameLen = 53
	// notesFile is the chart file rendered into Rendered.Notes.
	notesFile = "NOTES.txt"
)

// RenderContext renders ch with the values and release settings of opts, exactly
// as `helm template RELEASE CHART -n NAMESPACE -f ... --set ... --set-string
// ...` renders it, and returns the objects marked as the release's
// (owner.Mark: labels app.kubernetes.io/managed-by=vllmctl and
// vllmctl.io/release=<release>, annotation
// vllmctl.io/release-namespace=<namespace>; every other label, such as
// app.kubernetes.io/instance, as the chart renders it) and sorted with
// SortObjects.
//
// The render values are Helm's: .Release.Name/Namespace from opts,
// .Release.Revision opts.Revision (1 when 0), .Release.IsInstall
// !opts.IsUpgrade, .Release.Service "Helm" (kept so that charts written for
// Helm, which often put .Release.Service into a managed-by label, render as
// under Helm; vllmctl sets that top-level label anyway), .Capabilities
// those of `helm template` with KubeVersion DefaultKubeVersion (or
// opts.KubeVersion), the default API versions plus opts.APIVersions, and
// HelmVersion.Version HelmVersion. Without opts.Cluster there is no
// cluster: lookup returns an empty map, as with `helm template`. With it,
// the render is `helm upgrade`'s: the cluster's API versions (and the
// chart's CRDs', see Cluster.WithChartCRDs) and a lookup it answers.
//
// Dependencies are processed as Helm processes them (condition, tags,
// alias, import-values, globals, each subchart's values.schema.json), on a
// copy: ch is never changed, and may be rendered again. A dependency that
// is not in charts/ is left out with a line in Rendered.Warnings when it is
// disabled, and is an *InputError when it is enabled (Helm refuses both).
// Rendered.CRDs holds the CRDs of the crds/ directories of the chart and of
// its enabled subcharts.
//
// Every problem with the input is an *InputError.
//
// ctx is only used to cancel rendering.
func RenderContext(ctx context.Context, ch *chart.Chart, opts RenderOptions) (*Rendered, error) {
	if ch == nil || ch.Metadata == nil {
		return nil, errors.New("render: no chart")
	}
	caps, err := checkRenderInput(ch, opts)
	if err != nil {
		return nil, err
	}
	user, err := UserValues(opts)
	if err != nil {
		return nil, err
	}
	ch, user, reuseWarnings := reuseValues(ch, opts, user)

	// Helm's order (pkg/action/install.go): dependencies first, on a copy
	// (the caller's chart may be rendered again), then the CRDs of what
	// remains, then the values, validated against every schema.
	work, crds, warnings, err := prepareChart(ch, user, opts.ChartDir)
	if err != nil {
		return nil, err
	}
	caps = clusterCapabilities(caps, opts.Cluster, crds)
	top, err := renderValues(work, user, opts, caps)
	if err != nil {
		return nil, err
	}
	files, err := renderTemplates(ctx, work, top, opts.Cluster)
	if err != nil {
		return nil, err
	}
	notes := takeNotes(files, ch.Name())
	var ro *renderedObjects
	if opts.PostRenderer != nil {
		rendered := files
		files, err = postRender(ctx, opts.PostRenderer, files)
		if err == nil {
			if ro, err = releaseObjects(files, opts.ReleaseName, opts.Namespace); err != nil {
				err = postRenderedError(opts.PostRenderer, err)
			}
		}
		if err != nil {
			// The error quotes what the post-renderer printed, which may
			// echo the Secrets it was given or made.
			if opts.LearnSecrets != nil {
				opts.LearnSecrets(secretValues(rendered)...)
				opts.LearnSecrets(secretValues(files)...)
			}
			return nil, err
		}
	} else if ro, err = releaseObjects(files, opts.ReleaseName, opts.Namespace); err != nil {
		return nil, err
	}

	values, _ := top["Values"].(common.Values)
	return &Rendered{
		Chart: ChartInfo{
			Name:       ch.Metadata.Name,
			Version:    ch.Metadata.Version,
			AppVersion: ch.Metadata.AppVersion,
		},
		UserValues: user,
		Values:     values.AsMap(),
		Objects:    ro.objs,
		Hooks:      ro.hooks,
		Sources:    ro.sources,
		Manifest:   ro.manifest,
		Notes:      notes,
		CRDs:       crds,
		Warnings:   append(append(reuseWarnings, warnings...), ro.warnings...),
	}, nil
}

// checkRenderInput checks the release name, the chart and the chart's
// kubeVersion constraint (unless opts.SkipKubeVersionCheck), and returns
// the .Capabilities to render with.
func checkRenderInput(ch *chart.Chart, opts RenderOptions) (*common.Capabilities, error) {
	if err := ValidateReleaseName(opts.ReleaseName); err != nil {
		return nil, err
	}
	if err := checkChart(ch); err != nil {
		return nil, err
	}
	caps, err := capabilities(opts.KubeVersion)
	if err != nil {
		return nil, err
	}
	if opts.Cluster == nil && len(opts.APIVersions) > 0 {
		// helm template --api-versions: added to the default set.
		caps.APIVersions = append(caps.APIVersions, opts.APIVersions...)
	}
	if ch.Metadata.KubeVersion != "" && !opts.SkipKubeVersionCheck {
		if err := checkKubeVersion(ch, caps.KubeVersion); err != nil {
			return nil, err
		}
	}
	return caps, nil
}

// prepareChart processes the dependencies of ch on a copy, which it
// returns with the CRDs of that copy and the warnings about left-out
// dependencies and CRDs.
func prepareChart(ch *chart.Chart, user map[string]any, chartDir string) (*chart.Chart, []*unstructured.Unstructured, []string, error) {
	work, states, err := processDependencies(ch, user)
	if err != nil {
		return nil, nil, nil, err
	}
	warnings, err := missingDependencies(states, ch.Name(), chartDir)
	if err != nil {
		return nil, nil, nil, err
	}
	crds, crdWarnings, err := parseCRDs(work)
	if err != nil {
		return nil, nil, nil, err
	}
	return work, crds, append(warnings, crdWarnings...), nil
}

// renderValues coalesces user with the values of work, validates them
// against every schema, and returns the top-level render values (.Values,
// .Release, .Capabilities, ...).
func renderValues(work *chart.Chart, user map[string]any, opts RenderOptions, caps *common.Capabilities) (common.Values, error) {
	coalesced, err := util.CoalesceValues(work, user)
	if err != nil {
		return nil, &InputError{Source: "values", Msg: err.Error(), Err: err}
	}
	if err := util.ValidateAgainstSchema(work, coalesced); err != nil {
		return nil, schemaError(work, coalesced, err)
	}

	revision := opts.Revision
	if revision <= 0 {
		revision = 1
	}
	relOpts := common.ReleaseOptions{
		Name:      opts.ReleaseName,
		Namespace: opts.Namespace,
		Revision:  revision,
		IsInstall: !opts.IsUpgrade,
		IsUpgrade: opts.IsUpgrade,
	}
	// Schema validation already ran above on the same coalesced values.
	top, err := util.ToRenderValuesWithSchemaValidation(work, user, relOpts, caps, true)
	if err != nil {
		return nil, &InputError{Source: "values", Msg: err.Error(), Err: err}
	}
	return top, nil
}

// renderTemplates runs the template engine over work: with the lookup
// of c when it has one (answered by the cluster, read-only, under ctx),
// else without a client (lookup returns an empty map), DNS off either
// way. A cancelled ctx is returned as ctx's error, not as a template
// error; a lookup the cluster refused is a *LookupError.
func renderTemplates(ctx context.Context, work *chart.Chart, top common.Values, c *Cluster) (map[string]string, error) {
	var (
		files  map[string]string
		err    error
		lookup *lookupProvider
	)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c != nil && c.Lookup != nil {
		// Helm's engine takes a client provider only through this call,
		// which renders under context.Background(): the provider's
		// clients read under ctx instead.
		lookup = &lookupProvider{ctx: ctx, inner: c.Lookup}
		files, err = engine.RenderWithClientProvider(work, top, lookup)
	} else {
		var e engine.Engine
		files, err = e.RenderWithContext(ctx, work, top)
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		if lerr := lookupFailed(lookup, templateError(err)); lerr != nil {
			return nil, lerr
		}
		return nil, templateError(err)
	}
	return files, nil
}

// takeNotes returns the rendered NOTES.txt of the chart named chartName
// and deletes every NOTES.txt (the chart's and its subcharts') from files.
func takeNotes(files map[string]string, chartName string) string {
	notes := files[path.Join(chartName, "templates", notesFile)]
	for name := range files {
		if strings.HasSuffix(name, notesFile) {
			delete(files, name)
		}
	}
	return notes
}

// releaseObjects parses the rendered files into objects, checks their
// numbers, marks them as release's (in namespace) with owner.Mark, takes
// out the hooks (splitHooks), sorts the rest, and returns them with their
// source templates and their manifest.
func releaseObjects(files map[string]string, release, namespace string) (*renderedObjects, error) {
	objs, sources, err := parseRendered(files)
	if err != nil {
		return nil, err
	}
	if err := CheckNumbers(objs); err != nil {
		return nil, err
	}
	for _, o := range objs {
		if err := CheckMetadata(o); err != nil {
			return nil, err
		}
		owner.Mark(o, release, namespace)
	}
	r := &renderedObjects{sources: sources}
	r.objs, r.hooks, r.warnings = splitHooks(objs, sources)
	SortObjects(r.objs)
	if r.manifest, err = Manifest(r.objs); err != nil {
		return nil, err
	}
	return r, nil
}

// renderedObjects are the objects of a render.
type renderedObjects struct {
	objs     []*unstructured.Unstructured
	hooks    []Hook
	sources  map[string]string
	manifest string
	warnings []string
}

// ValidateReleaseName checks that name can name a release, by the one rule
// for release names (see ReleaseNameProblem): a DNS-1123 label of at most
// 53 characters (Helm's limit: object names get suffixes). A name that
// breaks it is an *InputError (exit code 2) naming it and the rule.
func ValidateReleaseName(name string) error {
	switch problem := ReleaseNameProblem(name); {
	case problem == "":
		return nil
	case name == "":
		return &InputError{Source: "release name", Msg: problem}
	default:
		return &InputError{Source: "release name", Msg: fmt.Sprintf("%q is invalid: it %s", name, problem)}
	}
}

// ReleaseNameProblem returns why name cannot name a release, or "" when it
// can. It is the one rule for release names, Helm's: a DNS-1123 label
// (lowercase letters, digits and '-', starting and ending with a letter or
// digit) of at most 53 characters. ValidateReleaseName and the release
// package's ValidateName both apply it.
func ReleaseNameProblem(name string) string {
	if name == "" {
		return "must not be empty"
	}
	if len(name) > maxReleaseNameLen || len(validation.IsDNS1123Label(name)) > 0 {
		return fmt.Sprintf("must be a DNS-1123 label of at most %d characters "+
			"(lowercase letters, digits and '-', starting and ending with a letter or digit)", maxReleaseNameLen)
	}
	return ""
}

// setError reports a malformed --set argument by its position and keys,
// never its values (a value may be a token): every value of the argument
// is masked in the parser's message too.
func setError(flag string, i int, arg string, err error) *InputError {
	var keys []string
	msg := err.Error()
	for _, part := range strings.Split(arg, ",") {
		key, value, _ := strings.Cut(part, "=")
		if key = strings.TrimSpace(key); key != "" {
			keys = append(keys, key)
		}
		if value != "" {
			msg = maskWord(msg, value)
		}
	}
	return &InputError{
		Source: flag,
		Msg:    fmt.Sprintf("argument %d (keys %s): %s", i+1, strings.Join(keys, ", "), msg),
		Err:    errors.New(msg),
	}
}

// maskWord replaces value in msg by "<value>" where it stands as a whole
// word (not inside another: the value "x" leaves "index" alone). Any bytes
// work, valid UTF-8 or not.
func maskWord(msg, value string) string {
	var b strings.Builder
	i := 0
	for i < len(msg) {
		j := strings.Index(msg[i:], value)
		if j < 0 {
			break
		}
		j += i
		end := j + len(value)
		if !wordBefore(msg, j) && !wordAt(msg, end) {
			b.WriteString(msg[i:j])
			b.WriteString("<value>")
			i = end
			continue
		}
		_, size := utf8.DecodeRuneInString(msg[j:])
		b.WriteString(msg[i : j+size])
		i = j + size
	}
	b.WriteString(msg[i:])
	return b.String()
}

// wordAt reports whether a letter, digit or '_' starts at msg[i:].
func wordAt(msg string, i int) bool {
	if i >= len(msg) {
		return false
	}
	r, _ := utf8.DecodeRuneInString(msg[i:])
	return isWordRune(r)
}

// wordBefore reports whether a letter, digit or '_' ends at msg[:i].
func wordBefore(msg string, i int) bool {
	if i <= 0 {
		return false
	}
	r, _ := utf8.DecodeLastRuneInString(msg[:i])
	return isWordRune(r)
}

func isWordRune(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

// errMsg is err's message without the *PathError operation prefix, which
// the InputError's File already names.
func errMsg(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// parseValuesFile parses a values file as Helm does (one or more YAML
// documents, merged). On error it finds the document at fault again to
// report the line in the whole file.
func parseValuesFile(name string, data []byte) (map[string]any, error) {
	vals, err := loader.LoadValues(bytes.NewReader(data))
	if err == nil {
		return vals, nil
	}
	ie := &InputError{Source: "values file", File: name, Msg: err.Error(), Err: err}
	lines := strings.SplitAfter(string(data), "\n")
	start := 0 // index of the first line of the current document
	check := func(end int) bool {
		doc := strings.Join(lines[start:end], "")
		if strings.TrimSpace(doc) == "" {
			return false
		}
		m := map[string]any{}
		derr := yaml.Unmarshal([]byte(doc), &m)
		if derr == nil {
			return false
		}
		line, msg := yamlErrorLine(derr)
		if line == 0 {
			line = firstContentLine(lines[start:end])
		}
		ie.Line = start + line
		if strings.Contains(msg, "cannot unmarshal") {
			msg = "a values document must be a map of keys to values"
		}
		ie.Msg = msg
		return true
	}
	for i, l := range lines {
		if isDocSeparator(l) {
			if check(i) {
				return nil, ie
			}
			start = i + 1
		}
	}
	check(len(lines))
	return nil, ie
}

// firstContentLine is the 1-based index of the first line in lines that
// is neither blank nor a comment (1 when there is none).
func firstContentLine(lines []string) int {
	for i, l := range lines {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
			return i + 1
		}
	}
	return 1
}

// isDocSeparator reports whether line separates YAML documents the way
// k8s.io/apimachinery's YAMLReader (used by Helm's values loader) sees it.
func isDocSeparator(line string) bool {
	rest, ok := strings.CutPrefix(line, "---")
	if !ok {
		return false
	}
	rest = strings.TrimSpace(rest)
	return rest == "" || strings.HasPrefix(rest, "#")
}

// checkChart refuses what `helm template` would refuse: a library chart.
// Dependencies are processed by processDependencies.
func checkChart(ch *chart.Chart) error {
	if ch.Metadata.Type == "library" {
		return &InputError{Source: "chart", File: ch.Name(), Msg: "is a library chart, which cannot be rendered"}
	}
	return nil
}

// capabilities returns `helm template`'s .Capabilities with the given
// Kubernetes version (DefaultKubeVersion when empty).
func capabilities(kubeVersion string) (*common.Capabilities, error) {
	if kubeVersion == "" {
		kubeVersion = DefaultKubeVersion
	}
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		return nil, &InputError{Source: "kubernetes version", Msg: fmt.Sprintf("%q: %v", kubeVersion, err), Err: err}
	}
	caps := common.DefaultCapabilities.Copy()
	caps.KubeVersion = *kv
	caps.HelmVersion.Version = HelmVersion
	caps.HelmVersion.GitCommit = ""
	caps.HelmVersion.GitTreeState = ""
	caps.HelmVersion.GoVersion = runtime.Version()
	caps.HelmVersion.KubeClientVersion = "v" + kv.Major + "." + kv.Minor
	return caps, nil
}

// checkKubeVersion applies the chart's kubeVersion constraint like Helm.
func checkKubeVersion(ch *chart.Chart, kv common.KubeVersion) error {
	c, err := semver.NewConstraint(ch.Metadata.KubeVersion)
	if err != nil {
		return &InputError{Source: "chart", File: ch.Name(), Msg: fmt.Sprintf("invalid kubeVersion %q: %v", ch.Metadata.KubeVersion, err), Err: err}
	}
	v, err := semver.NewVersion(kv.String())
	if err != nil {
		return fmt.Errorf("kubernetes version %s: %w", kv.Version, err)
	}
	if !c.Check(v) {
		return &InputError{
			Source: "chart", File: ch.Name(),
			Msg: fmt.Sprintf("requires kubeVersion %s, which is incompatible with Kubernetes %s", ch.Metadata.KubeVersion, kv.Version),
		}
	}
	return nil
}

// KubeVersion is the one rule for .Capabilities.KubeVersion: explicit (a
// --kube-version flag) when given, else the server's version when there is
// a cluster (deploy, diff), else DefaultKubeVersion (template).
func KubeVersion(explicit, server string) string {
	switch {
	case explicit != "":
		return explicit
	case server != "":
		return server
	}
	return DefaultKubeVersion
}

// checkSetNumbers refuses a --set value that is an integer beyond 64 bits:
// Helm's parser keeps it as a string, which a chart's int conversion
// turns into 0 (replicas: 0 would scale the service down to nothing).
// --set-string passes such a string on purpose.
func checkSetNumbers(i int, arg string) error {
	for _, part := range strings.Split(arg, ",") {
		key, value, ok := strings.Cut(part, "=")
		if !ok || !bigInteger.MatchString(value) {
			continue
		}
		if _, err := strconv.ParseInt(value, 10, 64); err != nil {
			return &InputError{
				Source: "--set", Path: strings.TrimSpace(key),
				Msg: fmt.Sprintf("argument %d: the integer is beyond 64 bits (use --set-string if a string of digits is meant)", i+1),
			}
		}
	}
	return nil
}

// bigInteger matches an integer written in decimal.
var bigInteger = regexp.MustCompile(`^[-+]?[0-9]+$`)
