package lint

import (
	"cmp"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Severity grades a finding.
type Severity string

// Severities, from the most to the least severe.
const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
	SeverityInfo    Severity = "info"
)

// rank orders severities: errors first.
func (s Severity) rank() int {
	switch s {
	case SeverityError:
		return 0
	case SeverityWarning:
		return 1
	case SeverityInfo:
		return 2
	default:
		return 3
	}
}

// Finding is one rule violation on one object.
type Finding struct {
	// Rule is the stable rule id, e.g. "VL001".
	Rule string `json:"rule"`
	// Severity is error, warning or info.
	Severity Severity `json:"severity"`
	// Object is "Kind namespace/name" ("Kind name" without a namespace).
	Object string `json:"object"`
	// Template is the chart template that rendered the object, as Helm
	// names it: "mychart/templates/deployment.yaml", or
	// "mychart/charts/sub/templates/deployment.yaml" for an object of a
	// subchart. Empty when Options.Source is not set.
	Template string `json:"template,omitempty"`
	// Field is the JSON path of the offending field inside the object, e.g.
	// spec.template.spec.containers[0].resources.limits.nvidia.com/gpu.
	Field string `json:"field"`
	// Message explains the problem and what to do about it.
	Message string `json:"message"`
}

// String renders a finding on one line.
func (f Finding) String() string {
	if f.Template != "" {
		return fmt.Sprintf("%s %s %s (%s) %s: %s", f.Severity, f.Rule, f.Object, f.Template, f.Field, f.Message)
	}
	return fmt.Sprintf("%s %s %s %s: %s", f.Severity, f.Rule, f.Object, f.Field, f.Message)
}

// Options tune a lint run.
type Options struct {
	// Namespace is the namespace of objects that do not set
	// metadata.namespace (the release namespace). Empty means unknown: such
	// objects are then not checked by VL008.
	Namespace string
	// Source, when set, names the template that rendered an object (e.g.
	// charts.Rendered.Source): findings carry it in Template, so that a
	// finding on a subchart's object names the subchart's file.
	Source func(*unstructured.Unstructured) string
}

// Rule describes one lint rule.
type Rule struct {
	// ID is the stable rule id, e.g. "VL001".
	ID string
	// Severity is the severity of every finding of the rule.
	Severity Severity
	// Summary says in one line what the rule asks for.
	Summary string
	// check returns the rule's findings on one workload; Run fills in
	// Rule, Severity and Object.
	check func(w *workload, opts Options) []Finding
}

// Rules returns the rules Run applies, in id order.
func Rules() []Rule {
	return []Rule{
		{ID: "VL001", Severity: SeverityError, Summary: "nvidia.com/gpu must be a whole number with requests equal to limits", check: checkGPUInteger},
		{ID: "VL002", Severity: SeverityWarning, Summary: "GPU pods should be Guaranteed QoS", check: checkGuaranteed},
		{ID: "VL003", Severity: SeverityWarning, Summary: "GPU server containers need a memory-backed emptyDir at /dev/shm", check: checkShm},
		{ID: "VL004", Severity: SeverityWarning, Summary: "server containers need readiness and startup probes", check: checkProbes},
		{ID: "VL005", Severity: SeverityWarning, Summary: "GPU server containers need a cpu limit of at least 4", check: checkCPULimit},
		{ID: "VL006", Severity: SeverityWarning, Summary: "containers need cpu and memory requests", check: checkRequests},
		{ID: "VL007", Severity: SeverityError, Summary: "workload selectors must match their pod template labels", check: checkSelector},
		{ID: "VL008", Severity: SeverityWarning, Summary: "workloads should not run in the default namespace", check: checkNamespace},
		{ID: "VL009", Severity: SeverityWarning, Summary: "images should carry a pinned tag other than latest", check: checkImageTag},
		{ID: "VL010", Severity: SeverityInfo, Summary: "surging a GPU Deployment needs spare GPUs", check: checkSurge},
		{ID: "VL011", Severity: SeverityError, Summary: "vLLM's tensor-parallel × pipeline-parallel size must equal the container's GPUs", check: checkTensorParallelGPUs},
		{ID: "VL012", Severity: SeverityError, Summary: "tensor parallelism needs a memory-backed /dev/shm of at least " + minTensorParallelShm, check: checkTensorParallelShm},
		{ID: "VL013", Severity: SeverityError, Summary: "--gpu-memory-utilization must be in (0, 1]", check: checkGPUMemoryUtilization},
		{ID: "VL014", Severity: SeverityError, Summary: "a Hugging Face token must come from a Secret, never a literal value", check: checkHFTokenSecret},
		{ID: "VL015", Severity: SeverityWarning, Summary: "a GPU server's startup probe must allow a few minutes to load the weights", check: checkStartupBudget},
		{ID: "VL016", Severity: SeverityError, Summary: "a multi-node vLLM group's tensor-parallel × pipeline-parallel size must equal its nodes × GPUs per pod", check: checkMultiNodeWorldSize},
		{ID: "VL017", Severity: SeverityError, Summary: "terminationGracePeriodSeconds must cover the preStop hook plus vLLM's --shutdown-timeout (drain)", check: checkDrainGrace},
	}
}

// Run lints objs and returns the findings, sorted (see Sort). Objects that
// carry no pod template are ignored. Run never modifies objs.
func Run(objs []*unstructured.Unstructured, opts Options) []Finding {
	rules := Rules()
	var out []Finding
	for _, obj := range objs {
		w := newWorkload(obj, opts)
		if w == nil {
			continue
		}
		template := ""
		if opts.Source != nil {
			template = opts.Source(obj)
		}
		for _, r := range rules {
			for _, f := range r.check(w, opts) {
				f.Rule = r.ID
				f.Severity = r.Severity
				f.Object = w.display
				f.Template = template
				out = append(out, f)
			}
		}
	}
	Sort(out)
	return out
}

// Sort orders findings by severity (errors first), rule, object, field and
// message.
func Sort(findings []Finding) {
	slices.SortStableFunc(findings, func(a, b Finding) int {
		return cmp.Or(
			cmp.Compare(a.Severity.rank(), b.Severity.rank()),
			cmp.Compare(a.Rule, b.Rule),
			cmp.Compare(a.Object, b.Object),
			cmp.Compare(a.Template, b.Template),
			cmp.Compare(a.Field, b.Field),
			cmp.Compare(a.Message, b.Message),
		)
	})
}

// Strict makes every warning of findings an error (`vllmctl lint
// --strict`) and sorts them again (see Sort); it returns how many it
// promoted.
func Strict(findings []Finding) (promoted int) {
	for i := range findings {
		if findings[i].Severity == SeverityWarning {
			findings[i].Severity = SeverityError
			promoted++
		}
	}
	Sort(findings)
	return promoted
}

// Counts returns how many findings have each severity.
func Counts(findings []Finding) (errors, warnings, infos int) {
	for _, f := range findings {
		switch f.Severity {
		case SeverityError:
			errors++
		case SeverityWarning:
			warnings++
		default:
			infos++
		}
	}
	return errors, warnings, infos
}
