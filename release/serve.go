// The serve check of a revision (wait.CheckServing): once its new pods
// are Ready, and during a canary hold, every pod the release's Services
// select must list the served model and complete one short request,
// through the API server's pod port-forward. Its configuration comes
// from the flags (ServeCheckOptions) and the chart's `serveCheck:` values.

package release

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// PhaseServe is the progress of a serve check: one event when it starts,
// one per pod, one with its outcome.
const PhaseServe Phase = "serve"

// ServeCheckOptions are the serve check's flags (--serve-check,
// --serve-check-timeout), shared by every operation of an engine.
type ServeCheckOptions struct {
	// Enabled, when set (--serve-check given), turns the check on or off
	// for any chart. Unset, the chart decides: on for the built-in chart
	// unless its values say serveCheck.enabled: false; for other charts
	// only when their values say serveCheck.enabled: true.
	Enabled *bool
	// Timeout, when positive (--serve-check-timeout given), bounds the
	// check of each pod; else serveCheck.timeout, else
	// wait.DefaultServeTimeout.
	Timeout time.Duration
}

// ServeCheckInputError is an invalid serve-check setting: a
// `serveCheck:` value or flag of the wrong type or out of range (exit
// code 2, nothing applied).
type ServeCheckInputError struct {
	// Field names the value ("serveCheck.timeout") or the flag.
	Field string
	Msg   string
}

func (e *ServeCheckInputError) Error() string {
	return "invalid serve check: " + e.Field + ": " + e.Msg
}

// ExitCode is 2: invalid input.
func (e *ServeCheckInputError) ExitCode() int { return exitcode.Invalid }

// ValidateServeTimeout checks a serve check timeout (of a flag or a
// value) named field: positive and at most wait.MaxServeTimeout.
func ValidateServeTimeout(field string, d time.Duration) error {
	if d <= 0 || d > wait.MaxServeTimeout {
		return &ServeCheckInputError{Field: field, Msg: fmt.Sprintf("%s: must be positive and at most %s", d, wait.MaxServeTimeout)}
	}
	return nil
}

// serveConfig is the serve check of one revision.
type serveConfig struct {
	spec wait.ServeSpec
	// port is serveCheck.port (0: each pod's container port named http).
	port int
}

// serveValueKeys are the keys of `serveCheck:`.
var serveValueKeys = []string{"enabled", "model", "prompt", "maxTokens", "timeout", "port"}

// resolveServeCheck returns the serve check of a revision of chart with
// the computed values, under the flags opts: nil when the check is off.
// A `serveCheck:` value of the wrong type is a *ServeCheckInputError.
func resolveServeCheck(chart storage.Chart, values map[string]any, opts ServeCheckOptions) (*serveConfig, error) {
	if opts.Enabled != nil && !*opts.Enabled {
		return nil, nil
	}
	if !chart.Builtin && opts.Enabled == nil {
		// Another chart's values are its own: only serveCheck.enabled:
		// true asks for the check (and then the keys must be ours).
		m, _ := values["serveCheck"].(map[string]any)
		if on, _ := m["enabled"].(bool); !on {
			return nil, nil
		}
	}
	sc, err := serveValues(values)
	if err != nil {
		return nil, err
	}
	if v, ok := sc["enabled"]; ok {
		on, ok := v.(bool)
		if !ok {
			return nil, serveTypeError("enabled", "a boolean", v)
		}
		if !on && opts.Enabled == nil {
			return nil, nil
		}
	}
	cfg := &serveConfig{}
	if cfg.spec.Model, err = serveString(sc, "model", 0); err != nil {
		return nil, err
	}
	if cfg.spec.Model == "" {
		cfg.spec.Model = servedModel(values)
	}
	if cfg.spec.Prompt, err = serveString(sc, "prompt", wait.MaxServePromptBytes); err != nil {
		return nil, err
	}
	if cfg.spec.MaxTokens, err = serveInt(sc, "maxTokens", 1, wait.MaxServeMaxTokens); err != nil {
		return nil, err
	}
	if cfg.port, err = serveInt(sc, "port", 1, math.MaxUint16); err != nil {
		return nil, err
	}
	if cfg.spec.Timeout, err = serveDuration(sc, "timeout"); err != nil {
		return nil, err
	}
	if opts.Timeout > 0 {
		cfg.spec.Timeout = opts.Timeout
	}
	if cfg.spec.Timeout == 0 {
		cfg.spec.Timeout = wait.DefaultServeTimeout
	}
	return cfg, nil
}

// serveValues returns the `serveCheck:` map of values (nil when absent),
// refusing keys it does not know.
func serveValues(values map[string]any) (map[string]any, error) {
	v, ok := values["serveCheck"]
	if !ok || v == nil {
		return nil, nil
	}
	sc, ok := v.(map[string]any)
	if !ok {
		return nil, &ServeCheckInputError{Field: "serveCheck", Msg: fmt.Sprintf("want a map of %s, got %s", strings.Join(serveValueKeys, ", "), typeName(v))}
	}
	var unknown []string
	for k := range sc {
		if !slices.Contains(serveValueKeys, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, &ServeCheckInputError{Field: "serveCheck." + unknown[0], Msg: "unknown key (known: " + strings.Join(serveValueKeys, ", ") + ")"}
	}
	return sc, nil
}

// servedModel is the model the built-in chart serves:
// model.servedModelName, else model.name ("" when neither is a string).
func servedModel(values map[string]any) string {
	m, _ := values["model"].(map[string]any)
	if s, _ := m["servedModelName"].(string); s != "" {
		return s
	}
	s, _ := m["name"].(string)
	return s
}

func serveTypeError(key, want string, v any) error {
	return &ServeCheckInputError{Field: "serveCheck." + key, Msg: fmt.Sprintf("want %s, got %s", want, typeName(v))}
}

func typeName(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("the string %q", clip(x, 40))
	case bool:
		return fmt.Sprintf("the boolean %t", x)
	case map[string]any:
		return "a map"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("%v", v)
}

// clip cuts s to at most n bytes, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// serveString reads the string key of sc ("" when absent), at most limit
// bytes (0: no limit).
func serveString(sc map[string]any, key string, limit int) (string, error) {
	v, ok := sc[key]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", serveTypeError(key, "a string", v)
	}
	if limit > 0 && len(s) > limit {
		return "", &ServeCheckInputError{Field: "serveCheck." + key, Msg: fmt.Sprintf("%d bytes, at most %d", len(s), limit)}
	}
	return s, nil
}

// serveInt reads the integer key of sc (0 when absent or 0) within
// [lo, hi].
func serveInt(sc map[string]any, key string, lo, hi int) (int, error) {
	v, ok := sc[key]
	if !ok || v == nil {
		return 0, nil
	}
	var f float64
	switch x := v.(type) {
	case int:
		f = float64(x)
	case int64:
		f = float64(x)
	case float64:
		f = x
	default:
		return 0, serveTypeError(key, "an integer", v)
	}
	if f == 0 {
		return 0, nil
	}
	if f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
		return 0, &ServeCheckInputError{Field: "serveCheck." + key, Msg: fmt.Sprintf("%v: want an integer from %d to %d", v, lo, hi)}
	}
	return int(f), nil
}

// serveDuration reads the duration key of sc (a Go duration string such
// as "60s"; 0 when absent).
func serveDuration(sc map[string]any, key string) (time.Duration, error) {
	v, ok := sc[key]
	if !ok || v == nil || v == "" {
		return 0, nil
	}
	s, ok := v.(string)
	if !ok {
		return 0, serveTypeError(key, `a duration such as "60s"`, v)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, &ServeCheckInputError{Field: "serveCheck." + key, Msg: fmt.Sprintf("%q: want a duration such as \"60s\"", clip(s, 40))}
	}
	if err := ValidateServeTimeout("serveCheck."+key, d); err != nil {
		return 0, err
	}
	return d, nil
}

// serveCheckOf is the serve check of revision rec under the engine's
// flags (nil: off, or no way to reach pods).
func (e *Engine) serveCheckOf(rec *storage.Release) (*serveConfig, error) {
	if e.PodHTTP == nil {
		return nil, nil
	}
	cfg, err := resolveServeCheck(rec.Chart, rec.ComputedValues, e.ServeCheck)
	if err != nil {
		return nil, fmt.Errorf("release %s revision %d: %w", rec.Name, rec.Revision, err)
	}
	return cfg, nil
}

// serveScope says which pods a serve check takes.
type serveScope struct {
	// pods, when set, are the pods to check, by name (a canary's).
	pods []string
	// live takes every Ready pod the Services select, of any revision
	// (`vllmctl test`: what serves now); otherwise only the pods of rec's
	// ReplicaSets and ControllerRevisions.
	live bool
}

// runServeCheck runs the serve check cfg on the pods of rec (of scope)
// among objs, reporting progress, and returns its report and, when a pod
// does not serve, the failure (VerdictNotServing) with an error saying
// so. A failure to find the pods is an error with no diagnosis.
func (e *Engine) runServeCheck(ctx context.Context, rec *storage.Release, objs []*unstructured.Unstructured, cfg *serveConfig,
	scope serveScope) (*rollout.ServeReport, *rollout.Diagnosis, error) {
	targets, owners, err := e.serveTargets(ctx, rec, objs, cfg, scope)
	if err != nil {
		return nil, nil, fmt.Errorf("release %s revision %d: serve check: %w", rec.Name, rec.Revision, err)
	}
	model := cfg.spec.Model
	if model == "" {
		model = "the first model listed"
	}
	if len(targets) == 0 {
		rep := &rollout.ServeReport{Outcome: rollout.ServeSkipped, Reason: "no Ready pod to check", Model: cfg.spec.Model, Pods: []rollout.ServePod{}}
		e.emit(rec.Name, rec.Revision, PhaseServe, "", rollout.ServeSkipped, rep.Reason)
		return rep, nil, nil
	}
	e.emit(rec.Name, rec.Revision, PhaseServe, "", "checking", fmt.Sprintf("%d pod(s): %s on /v1/models and one completion, timeout %s",
		len(targets), model, cfg.spec.Timeout))
	ns := e.Namespace()
	rep, f := wait.CheckServing(ctx, wait.PodHTTPFunc(e.PodHTTP), ns, targets, cfg.spec, func(p rollout.ServePod) {
		if p.Outcome == rollout.ServePassed {
			e.emit(rec.Name, rec.Revision, PhaseServe, "Pod "+ns+"/"+p.Pod, "serving",
				fmt.Sprintf("%s listed, completion %d in %dms", p.Model, p.Status, p.LatencyMs))
			return
		}
		e.emit(rec.Name, rec.Revision, PhaseServe, "Pod "+ns+"/"+p.Pod, "not serving", p.Message)
	})
	if f == nil && rep.Outcome == rollout.ServeSkipped {
		e.emit(rec.Name, rec.Revision, PhaseServe, "", rollout.ServeSkipped, rep.Reason)
		return rep, nil, nil
	}
	if f == nil {
		e.emit(rec.Name, rec.Revision, PhaseServe, "", rollout.ServePassed, fmt.Sprintf("%d pod(s) serve %s", len(rep.Pods), model))
		return rep, nil, nil
	}
	f.Object = owners[f.Pod]
	e.emit(rec.Name, rec.Revision, PhaseServe, "", rollout.ServeFailed, f.Message)
	return rep, f, errors.New(f.Message) // the rollout's error names the release
}

// checkServing runs the serve check of rec (when it is on) on the pods of
// scope, keeping rec's lock fresh meanwhile when it holds one, and
// records the report in rec.ServeCheck. It returns the failure
// (VerdictNotServing, or ServeCheckError when the pods could not be
// listed) with its error; a lock lost meanwhile is its
// *storage.ConflictError, without a diagnosis.
func (e *Engine) checkServing(ctx context.Context, rec *storage.Release, objs []*unstructured.Unstructured, scope serveScope) (*rollout.Diagnosis, error) {
	cfg, err := e.serveCheckOf(rec)
	if err != nil {
		return &rollout.Diagnosis{Reason: "ServeCheckError", Message: err.Error()}, err
	}
	if cfg == nil {
		return nil, nil
	}
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var hb *heartbeat
	if rec.Status.IsPending() {
		hb = e.startHeartbeat(cctx, rec, cancel)
	}
	rep, f, err := e.runServeCheck(cctx, rec, objs, cfg, scope)
	if lost := hb.stop(); lost != nil {
		return nil, lost
	}
	rec.ServeCheck = rep
	if err != nil && f == nil {
		f = &rollout.Diagnosis{Reason: "ServeCheckError", Message: err.Error()}
	}
	return f, err
}
