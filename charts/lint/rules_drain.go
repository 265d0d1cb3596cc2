package lint

import (
	"errors"
	"fmt"
	"math"
	"path"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// defaultGracePeriod is the terminationGracePeriodSeconds Kubernetes
// gives a pod that does not set it.
const defaultGracePeriod = 30

// drainHookMarker starts the program of the built-in chart's drain hook
// (charts/vllm/templates/_helpers.tpl, vllm.drainScript): `python3 -c
// PROGRAM HOST DELAY SECONDS`, which runs at most DELAY + SECONDS.
const drainHookMarker = "# vllmctl drain hook"

// maxSeconds caps every duration VL017 adds (the hook's, vLLM's
// --shutdown-timeout, the grace period): far beyond any real grace period
// (about 68 years), and small enough that their sum never overflows.
const maxSeconds = math.MaxInt32

// seconds converts a number of seconds from a manifest or a command line
// to whole seconds, rounded up and capped at maxSeconds; false for a
// negative number or NaN.
func seconds(f float64) (int64, bool) {
	if f < 0 || math.IsNaN(f) {
		return 0, false
	}
	return int64(math.Ceil(math.Min(f, maxSeconds))), true
}

// shellSleep matches a shell script that starts with `sleep N` (coreutils'
// suffixes s, m, h, d allowed), alone or followed by more commands.
var shellSleep = regexp.MustCompile(`^(?:exec\s+)?(?:/bin/|/usr/bin/)?sleep\s+([0-9]+(?:\.[0-9]+)?)([smhd]?)\s*(?:$|;|&&|\|\||\n)`)

// podTemplate is one pod spec of a workload, with its containers.
type podTemplate struct {
	specPath   string
	spec       map[string]any
	containers []container
}

// podTemplates returns the pod specs of w: its own, and for a
// LeaderWorkerSet the leader template's too (the workload view holds the
// worker template; the leader, which serves the API, is the one that
// drains).
func podTemplates(w *workload) []podTemplate {
	out := []podTemplate{{specPath: w.specPath, spec: w.spec, containers: w.containers}}
	if w.kind != "LeaderWorkerSet" {
		return out
	}
	fields := []string{"spec", "leaderWorkerTemplate", "leaderTemplate", "spec"}
	spec, found, err := unstructured.NestedMap(w.obj.Object, fields...)
	if err != nil || !found {
		return out
	}
	specPath := strings.Join(fields, ".")
	return append([]podTemplate{{specPath: specPath, spec: spec, containers: containersOf(spec, specPath)}}, out...)
}

// gracePeriod returns a pod spec's terminationGracePeriodSeconds, the
// Kubernetes default when unset, and whether it was set.
func gracePeriod(spec map[string]any) (grace int64, set bool) {
	var f float64
	switch v := spec["terminationGracePeriodSeconds"].(type) {
	case int64:
		f = float64(v)
	case float64:
		f = v
	default:
		return defaultGracePeriod, false
	}
	if n, ok := seconds(f); ok {
		return n, true
	}
	return 0, true // negative: the API server refuses it; 0 is the strictest reading
}

// preStopSeconds returns how long a container's preStop hook runs at
// most, as far as it can be told from the manifest, and a description of
// the hook; ok is false when there is no hook or its duration cannot be
// told (an HTTP hook, a program of unknown length, `sleep infinity`).
// Recognised: Kubernetes' sleep action (lifecycle.preStop.sleep.seconds),
// an exec of `sleep N`, a shell (`sh -c`, `bash -c`) whose script starts
// with `sleep N`, and the built-in chart's drain hook.
func preStopSeconds(c container) (n int64, what string, ok bool) {
	hook, _, _ := unstructured.NestedMap(c.raw, "lifecycle", "preStop")
	if hook == nil {
		return 0, "", false
	}
	if sleep, isMap := hook["sleep"].(map[string]any); isMap {
		var f float64
		switch v := sleep["seconds"].(type) {
		case int64:
			f = float64(v)
		case float64:
			f = v
		default:
			return 0, "", false
		}
		n, ok := seconds(f)
		if !ok {
			return 0, "", false
		}
		return n, fmt.Sprintf("sleep action of %ds", n), true
	}
	items, _, _ := unstructured.NestedSlice(hook, "exec", "command")
	cmd := make([]string, 0, len(items))
	for _, it := range items {
		s, _ := it.(string)
		cmd = append(cmd, s)
	}
	if len(cmd) == 0 {
		return 0, "", false
	}
	switch base := path.Base(cmd[0]); {
	case strings.HasPrefix(base, "python") && len(cmd) == 6 && cmd[1] == "-c" && strings.HasPrefix(cmd[2], drainHookMarker):
		// The program reads them with int(): plain integers only.
		d, errDelay := strconv.ParseUint(cmd[4], 10, 64)
		b, errBudget := strconv.ParseUint(cmd[5], 10, 64)
		if (errDelay != nil && !errors.Is(errDelay, strconv.ErrRange)) || (errBudget != nil && !errors.Is(errBudget, strconv.ErrRange)) {
			return 0, "", false
		}
		delay, budget := int64(min(d, maxSeconds)), int64(min(b, maxSeconds))
		return delay + budget, fmt.Sprintf("the built-in chart's drain hook: %ds delay + at most %ds for the requests in flight", delay, budget), true
	case base == "sleep" && len(cmd) == 2:
		if n, parsed := sleepSeconds(cmd[1], ""); parsed {
			return n, fmt.Sprintf("exec `sleep %s`", cmd[1]), true
		}
	case (base == "sh" || base == "bash" || base == "ash" || base == "dash") && len(cmd) >= 3 && cmd[1] == "-c":
		m := shellSleep.FindStringSubmatch(strings.TrimSpace(cmd[2]))
		if m == nil {
			return 0, "", false
		}
		if n, parsed := sleepSeconds(m[1], m[2]); parsed {
			return n, fmt.Sprintf("%s -c `sleep %s%s`", base, m[1], m[2]), true
		}
	}
	return 0, "", false
}

// sleepSeconds converts coreutils sleep's NUMBER[SUFFIX] to whole seconds,
// rounded up.
func sleepSeconds(number, suffix string) (int64, bool) {
	if suffix == "" && number != "" {
		if last := number[len(number)-1]; strings.ContainsRune("smhd", rune(last)) {
			number, suffix = number[:len(number)-1], string(last)
		}
	}
	f, err := strconv.ParseFloat(number, 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, false
	}
	switch suffix {
	case "m":
		f *= 60
	case "h":
		f *= 3600
	case "d":
		f *= 86400
	}
	return seconds(f)
}

// shutdownTimeout returns a vLLM container's --shutdown-timeout (vLLM >=
// 0.18.0: how long vLLM lets running requests finish after SIGTERM), 0
// when it is not set or not a number of seconds.
func shutdownTimeout(c container) int64 {
	flags, isVLLM := vllmArgs(c)
	v, set := flags["shutdown-timeout"]
	if !isVLLM || !set {
		return 0
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 {
		return 0
	}
	n, _ := seconds(f)
	return n
}

// checkDrainGrace is VL017: a container's preStop hook and vLLM's own
// drain after SIGTERM (--shutdown-timeout) both run inside the pod's
// terminationGracePeriodSeconds; when they can take longer, the kubelet
// kills the server while requests are still in flight.
func checkDrainGrace(w *workload, _ Options) []Finding {
	var out []Finding
	for _, pt := range podTemplates(w) {
		grace, graceSet := gracePeriod(pt.spec)
		for _, c := range pt.containers {
			if c.init {
				continue
			}
			hook, what, hookKnown := preStopSeconds(c)
			drain := shutdownTimeout(c)
			need := drain
			if hookKnown {
				need += hook
			}
			if need <= grace {
				continue
			}
			var parts []string
			if hookKnown {
				parts = append(parts, fmt.Sprintf("its preStop hook (%s) runs up to %ds", what, hook))
			}
			if drain > 0 {
				parts = append(parts, fmt.Sprintf("vLLM's --shutdown-timeout lets running requests finish for up to %ds after SIGTERM", drain))
			}
			graceWhat := fmt.Sprintf("%ds", grace)
			if !graceSet {
				graceWhat += " (unset: Kubernetes' default)"
			}
			out = append(out, Finding{
				Field: pt.specPath + ".terminationGracePeriodSeconds",
				Message: fmt.Sprintf("container %q: %s, %ds in all, but terminationGracePeriodSeconds is %s: the hook and the engine's exit both count against it, and the kubelet kills the container (SIGKILL) with requests still in flight; set terminationGracePeriodSeconds to at least %d, plus a margin for the engine's own exit (built-in chart: terminationGracePeriodSeconds >= drain.delaySeconds + drain.seconds, + drain.engineTimeoutSeconds with drain.engineFlag)",
					c.name, strings.Join(parts, " and "), need, graceWhat, need),
			})
		}
	}
	return out
}
