package vllm

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// ValuesAnnotationPrefix begins the Chart.yaml annotations by which a
// chart declares where its values set a vLLM setting:
// "vllmctl.io/values.<setting>: <values path>", for example
// "vllmctl.io/values.max-model-len: model.maxModelLen". The failure
// hints name a values path only where the chart declares one; otherwise
// they name the vLLM flag and the value the pod runs with.
const ValuesAnnotationPrefix = "vllmctl.io/values."

// The settings a chart may map to its values (the keys of a ValuesMap).
// The flag settings are named as vLLM's flags, without dashes.
const (
	SettingModel                = "model"
	SettingMaxModelLen          = "max-model-len"
	SettingGPUMemoryUtilization = "gpu-memory-utilization"
	SettingTensorParallelSize   = "tensor-parallel-size"
	SettingMaxNumSeqs           = "max-num-seqs"
	SettingDtype                = "dtype"
	SettingKVCacheDtype         = "kv-cache-dtype"
	// SettingGPU is the server container's nvidia.com/gpu count.
	SettingGPU = "gpu"
	// SettingExtraArgs is a list of further vLLM flags: where a flag the
	// pod does not pass yet can be added.
	SettingExtraArgs = "extra-args"
	// SettingHFTokenSecret names the Secret the Hugging Face token is
	// read from.
	SettingHFTokenSecret = "hf-token-secret"
	// SettingImageTag is the server image's tag.
	SettingImageTag = "image-tag"
	// SettingShm switches a memory-backed /dev/shm on; SettingShmSizeLimit
	// is its size.
	SettingShm          = "shm"
	SettingShmSizeLimit = "shm-size-limit"
	// SettingModelCachePersistence keeps the weights on a
	// PersistentVolumeClaim; SettingModelCacheMountPath is where they are
	// mounted; SettingWeightsFetcher fetches them in an init container.
	SettingModelCachePersistence = "model-cache-persistence"
	SettingModelCacheMountPath   = "model-cache-mount-path"
	SettingWeightsFetcher        = "weights-fetcher"
	// The startup probe's failureThreshold and periodSeconds.
	SettingStartupFailureThreshold = "startup-failure-threshold"
	SettingStartupPeriodSeconds    = "startup-period-seconds"
)

// Settings are the settings a ValuesMap may name, flag settings first.
func Settings() []string {
	return []string{SettingModel, SettingMaxModelLen, SettingGPUMemoryUtilization, SettingTensorParallelSize,
		SettingMaxNumSeqs, SettingDtype, SettingKVCacheDtype,
		SettingGPU, SettingExtraArgs, SettingHFTokenSecret, SettingImageTag, SettingShm, SettingShmSizeLimit,
		SettingModelCachePersistence, SettingModelCacheMountPath, SettingWeightsFetcher,
		SettingStartupFailureThreshold, SettingStartupPeriodSeconds}
}

// FlagSetting reports whether setting is a vLLM flag (one SettingExtraArgs
// can add).
func FlagSetting(setting string) bool {
	return slices.Contains(Settings()[:7], setting)
}

// ValuesMap maps settings (Settings) to the values paths of a chart that
// set them, in Helm's --set syntax ("model.maxModelLen",
// "servingEngineSpec.modelSpec[0].vllmConfig.maxModelLen"). nil: the chart
// maps nothing, so hints name flags and the pod's values only.
type ValuesMap map[string]string

// Path is the values path of setting ("" when the chart maps none).
func (m ValuesMap) Path(setting string) string { return m[setting] }

// ParseValuesMap reads the values mapping a chart declares in its
// Chart.yaml annotations (ValuesAnnotationPrefix + setting). Other
// annotations are ignored; an unknown setting or an empty path is an
// error naming the annotation. nil when the chart declares none.
func ParseValuesMap(annotations map[string]string) (ValuesMap, error) {
	keys := make([]string, 0, len(annotations))
	for k := range annotations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var m ValuesMap
	for _, k := range keys {
		setting, ok := strings.CutPrefix(k, ValuesAnnotationPrefix)
		if !ok {
			continue
		}
		if !slices.Contains(Settings(), setting) {
			return nil, fmt.Errorf("annotation %s: unknown setting %q (known: %s)", k, setting, strings.Join(Settings(), ", "))
		}
		path := strings.TrimSpace(annotations[k])
		if path == "" || strings.ContainsAny(path, " \t\n") {
			return nil, fmt.Errorf("annotation %s: %q is not a values path (e.g. model.maxModelLen)", k, annotations[k])
		}
		if m == nil {
			m = ValuesMap{}
		}
		m[setting] = path
	}
	return m, nil
}
