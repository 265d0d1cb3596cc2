// The cause classifier: why a vLLM server failed, in vLLM's terms, from the
// failing container's log, its last termination, the pod's events and the
// pod spec. Kubernetes says only "Error, exit code 1" or "startup probe
// failed"; most failed rollouts of an LLM server are one of a short list
// of causes that its log names. The rules are a table, tried in order:
// the first that matches decides the cause, the line or event it matched is
// the evidence, and its hints name the setting to change, quoting the
// values the pod runs with.

package vllmcause

import (
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Cause names why a vLLM server failed: a stable, machine-readable value
// (the result document's failure.cause). More may be added; readers must
// accept values they do not know.
type Cause string

// The causes.
const (
	// CauseGPUOOM: GPU memory ran out while loading or profiling.
	CauseGPUOOM Cause = "gpu-oom"
	// CauseKVCache: no room left for the KV cache of one --max-model-len
	// sequence.
	CauseKVCache Cause = "kv-cache"
	// CauseModelAuth: a gated or private model without a valid Hugging
	// Face token.
	CauseModelAuth Cause = "model-auth"
	// CauseModelNotFound: the model name or path does not exist.
	CauseModelNotFound Cause = "model-not-found"
	// CauseShm: /dev/shm too small (bus error, no space for a shared
	// memory segment).
	CauseShm Cause = "shm"
	// CauseNCCL: NCCL failed between tensor-parallel workers.
	CauseNCCL Cause = "nccl"
	// CauseDtypeUnsupported: a dtype the GPU does not support (bfloat16
	// below compute capability 8.0).
	CauseDtypeUnsupported Cause = "dtype-unsupported"
	// CauseTensorParallel: the tensor-parallel size does not divide the
	// attention heads, or does not match the GPUs of the container.
	CauseTensorParallel Cause = "tensor-parallel"
	// CauseGPUNotVisible: the container sees no GPU (none requested, or
	// no device plugin).
	CauseGPUNotVisible Cause = "gpu-not-visible"
	// CauseCUDADriver: the node's CUDA driver is too old for the image.
	CauseCUDADriver Cause = "cuda-driver"
	// CauseStartupProbe: the startup probe killed a container still
	// loading.
	CauseStartupProbe Cause = "startup-probe"
	// CauseUnknown: no rule matched.
	CauseUnknown Cause = "unknown"
)

// maxEvidence bounds the length of the evidence quoted.
const maxEvidence = 400

// causeInput is what the classifier reads about the failing container.
type causeInput struct {
	// logs are log tails, the most telling first (the previous instance's,
	// then the current one's), each oldest line first.
	logs [][]string
	// term is the container's last termination (nil when none).
	term *corev1.ContainerStateTerminated
	// events are the pod's events, formatted "Type Reason: message".
	events []string
	// spec is the container in the pod spec (nil when unknown).
	spec *serverSpec
}

// causeMatch is what decided a cause: the rule's cause, the evidence, and
// the submatches of the pattern that matched it.
type causeMatch struct {
	cause    Cause
	evidence string
	sub      []string
	re       *regexp.Regexp
}

// group is the submatch of the named group of the pattern that matched
// ("" when it has none, or it matched nothing).
func (m causeMatch) group(name string) string {
	if m.re == nil {
		return ""
	}
	for i, n := range m.re.SubexpNames() {
		if n == name && i < len(m.sub) && m.sub[i] != "" {
			return m.sub[i]
		}
	}
	return ""
}

// causeRule recognises one cause from one source: log lines, events or
// the last termination (exactly one of log, event and term is set).
type causeRule struct {
	cause Cause
	// log are the patterns of an error line of the container's log; lines
	// vLLM (or Python's logging) writes at DEBUG, INFO or WARNING level,
	// and NCCL's INFO lines, never count.
	log []*regexp.Regexp
	// event are the patterns of a pod event, as formatted by formatEvent.
	event []*regexp.Regexp
	// term recognises the last termination and describes it.
	term func(t *corev1.ContainerStateTerminated) (string, bool)
	// hints name the settings to change.
	hints func(s *serverSpec, m causeMatch) []string
}

// causeRules is the rule table, from causePatterns in causeRuleOrder,
// with the patterns keep accepts (all when keep is nil).
func causeRules(keep func(causePattern) bool) []causeRule {
	hints := map[Cause]func(s *serverSpec, m causeMatch) []string{
		CauseCUDADriver: cudaDriverHints, CauseGPUNotVisible: gpuNotVisibleHints, CauseShm: shmHints,
		CauseTensorParallel: tensorParallelHints, CauseDtypeUnsupported: dtypeHints, CauseKVCache: kvCacheHints,
		CauseGPUOOM: gpuOOMHints, CauseModelAuth: modelAuthHints, CauseModelNotFound: modelNotFoundHints,
		CauseNCCL: ncclHints, CauseStartupProbe: startupProbeHints,
	}
	pats := causePatterns()
	var out []causeRule
	for _, rule := range causeRuleOrder() {
		var first causePattern
		for _, p := range pats {
			if p.rule == rule {
				first = p
				break
			}
		}
		r := causeRule{cause: first.cause(), hints: hints[first.cause()]}
		switch first.kind() {
		case "termination":
			if keep != nil && !keep(first) {
				continue
			}
			r.term = busError
		case "event":
			r.event = compiledPatterns(pats, rule, keep)
		default:
			r.log = compiledPatterns(pats, rule, keep)
		}
		if r.term == nil && len(r.log) == 0 && len(r.event) == 0 {
			continue
		}
		out = append(out, r)
	}
	return out
}

// timestampPattern is a timestamp before a log line: a container
// runtime's or kubectl's RFC 3339 one, Python logging's "2023-11-30
// 10:19:23,769", the vLLM router's "[2025-05-21 11:44:46,898]".
const timestampPattern = `(?:\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?\s+)?`

// linePrefixPattern is what may come before a log line's level, each part
// optional, in this order: a timestamp; torch.distributed's "[rank0]:";
// the process that wrote the line, as vLLM's multiprocessing and Ray name
// it ("(EngineCore_DP0 pid=268)", "(VllmWorkerProcess pid=232)",
// "(RayWorkerWrapper pid=335, ip=10.1.0.67)", Ray Data's
// "(MapWorker(MapBatches(vLLMEngineStageUDF)) pid=12390, ip=10.0.118.90)");
// the timestamp of what that process logged (Ray's "(Worker pid=333)
// 2023-06-30 07:19:07,337 ERROR worker.py:861 -- ...").
const linePrefixPattern = timestampPattern +
	`(?:\[rank\d+\]:\s*)?` +
	`(?:\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*?\bpid=\d+[^()]*\)\s*)?` +
	timestampPattern

// logLevelPattern recognises the level of a log line, after linePrefixPattern,
// as vLLM writes it: "INFO 10-21 00:33:12 [...]", v0.2-v0.6's "INFO 01-23
// 10:00:00 llm_engine.py:70]", NVIDIA NIM's "INFO 2025-07-21 14:34:24.934";
// as Python's logging does ("WARNING:huggingface_hub...", uvicorn's
// "INFO:     ...", Ray's "WARNING worker.py:2074 -- ..."): the first
// submatch; or as glog/c10 (torch's "[W914 04:53:45.615 ProcessGroupNCCL.cpp:1476]",
// "[E ProcessGroupNCCL.cpp:474]") and klog ("E1027 22:25:32.427556 1
// proxy.go:268]") do: a letter, the second submatch.
const logLevelPattern = `^` + linePrefixPattern +
	`(?:(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)(?:\s+(?:\d{4}-)?\d\d-\d\d|:|\s+\S+\.py:\d+\s+--)` +
	`|\[?([IWEF])(?:\d{3,4} \d\d:\d\d:\d\d\.\d+\s+(?:\d+\s+)?| )\S+:\d+\])`

// prefixPattern is the part of a log line before its message: what
// linePrefixPattern recognises, then vLLM's level, time and source.
const prefixPattern = `^` + linePrefixPattern +
	`(?:(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+(?:\d{4}-)?\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?(?:\s+\[[^\]]*\]|\s+\S+\.py:\d+\])\s*)?`

// ncclInfoPattern recognises NCCL's INFO lines ("host:pid:tid [0] NCCL
// INFO ...", "[3] NCCL INFO ..."), after linePrefixPattern: at the start of
// the line, so a line that only quotes one, as logs pasted without their
// newlines do, still counts.
const ncclInfoPattern = `^` + linePrefixPattern + `(?:\S+ )?\[\d+\] NCCL INFO `

// classifier applies the rule table.
type classifier struct {
	rules    []causeRule
	level    *regexp.Regexp
	prefix   *regexp.Regexp
	ncclInfo *regexp.Regexp
}

func newClassifier() *classifier { return newClassifierWith(nil) }

// newClassifierWith is a classifier with the patterns keep accepts (all
// when keep is nil).
func newClassifierWith(keep func(causePattern) bool) *classifier {
	return &classifier{rules: causeRules(keep), level: regexp.MustCompile(logLevelPattern), prefix: regexp.MustCompile(prefixPattern),
		ncclInfo: regexp.MustCompile(ncclInfoPattern)}
}

// classify returns the cause of the input, its evidence and the hints
// (none for CauseUnknown).
func (c *classifier) classify(in causeInput) (Cause, string, []string) {
	msgs := make([][]string, len(in.logs))
	for i, lines := range in.logs {
		msgs[i] = c.messages(lines)
	}
	for _, r := range c.rules {
		m, ok := c.match(r, in, msgs)
		if !ok {
			continue
		}
		spec := in.spec
		if spec == nil {
			spec = &serverSpec{flags: map[string]string{}}
		}
		var hints []string
		if r.hints != nil {
			hints = r.hints(spec, m)
		}
		return m.cause, m.evidence, hints
	}
	return CauseUnknown, "", nil
}

// messages returns the message of each line of a log, without vLLM's
// prefix; "" for the lines that never count: logged at DEBUG, INFO or
// WARNING level, NCCL's INFO lines, and the source line a Python traceback
// quotes under each "File ..., line N" (code, not what happened).
func (c *classifier) messages(lines []string) []string {
	out := make([]string, len(lines))
	frame := false
	for i, l := range lines {
		line := strings.TrimSpace(l)
		msg := strings.TrimSpace(c.prefix.ReplaceAllString(line, ""))
		quoted := frame
		frame = strings.HasPrefix(msg, `File "`)
		if lvl := c.level.FindStringSubmatch(line); (lvl != nil && !errorLevel(lvl[1]+lvl[2])) || c.ncclInfo.MatchString(line) || quoted {
			continue
		}
		out[i] = msg
	}
	return out
}

// errorLevel reports whether a level logLevelPattern recognised is an
// error's: ERROR or CRITICAL, glog's and klog's E and F.
func errorLevel(level string) bool {
	switch level {
	case "ERROR", "CRITICAL", "E", "F":
		return true
	}
	return false
}

// match applies one rule: to the log messages (the last matching line of
// the most telling log), the events (the most recent), or the
// termination.
func (c *classifier) match(r causeRule, in causeInput, msgs [][]string) (causeMatch, bool) {
	switch {
	case r.log != nil:
		for _, log := range msgs {
			for i := len(log) - 1; i >= 0; i-- {
				if log[i] == "" {
					continue
				}
				line := matchable(log[i])
				for _, re := range r.log {
					if sub := re.FindStringSubmatch(line); sub != nil {
						return causeMatch{cause: r.cause, evidence: clip(log[i]), sub: sub, re: re}, true
					}
				}
			}
		}
	case r.event != nil:
		for i := len(in.events) - 1; i >= 0; i-- {
			ev := matchable(in.events[i])
			for _, re := range r.event {
				if sub := re.FindStringSubmatch(ev); sub != nil {
					return causeMatch{cause: r.cause, evidence: clip(in.events[i]), sub: sub, re: re}, true
				}
			}
		}
	case r.term != nil && in.term != nil:
		if ev, ok := r.term(in.term); ok {
			return causeMatch{cause: r.cause, evidence: ev}, true
		}
	}
	return causeMatch{}, false
}

// maxMatchBytes bounds the part of a log line or event the cause rules
// read: what names a cause comes early in a line, and matching a huge
// line (a megabyte of a tensor dump, say) would cost a core for seconds.
const maxMatchBytes = 8 << 10

// matchable is line cut to maxMatchBytes.
func matchable(line string) string {
	if len(line) > maxMatchBytes {
		return line[:maxMatchBytes]
	}
	return line
}

// busError recognises a container killed by SIGBUS (exit code 135): what a
// write to a full /dev/shm does.
func busError(t *corev1.ContainerStateTerminated) (string, bool) {
	if t.Signal == 7 || t.ExitCode == 128+7 {
		return fmt.Sprintf("the container was killed by SIGBUS (%s), as a write to a full /dev/shm does", TerminationMessage(t)), true
	}
	return "", false
}

// clip bounds evidence to maxEvidence characters.
func clip(s string) string {
	if len(s) <= maxEvidence {
		return s
	}
	cut := maxEvidence
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// podCauseInput gathers the classifier's input for container of pod: its
// last termination, the pod's events and its spec; the logs are added by
// the caller.
func podCauseInput(pod *corev1.Pod, container string, events []string) causeInput {
	in := causeInput{events: events, spec: newServerSpec(pod, container)}
	if pod == nil {
		return in
	}
	for _, cs := range append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if cs.Name != container {
			continue
		}
		in.term = cs.LastTerminationState.Terminated
		if cs.State.Terminated != nil {
			in.term = cs.State.Terminated
		}
	}
	return in
}
