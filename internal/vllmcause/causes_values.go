// How the hints name a setting: as the vLLM flag (or the container's
// field) with the value the pod runs with, and as a values path only
// where the chart in use is known to map it (its declared ValuesMap: the
// built-in chart's, or one a chart declares in Chart.yaml annotations).

package vllmcause

import (
	"fmt"

	"github.com/vllmctl/vllmctl/internal/vllm"
)

// valuesPath is where the chart's values set setting: the mapped path; for
// a vLLM flag the pod does not pass, the chart's extra-args path (where it
// can be added); "" when the chart maps neither.
func (s *serverSpec) valuesPath(setting string) string {
	if p := s.values.Path(setting); p != "" {
		return p
	}
	if vllm.FlagSetting(setting) {
		if _, set := s.flags[setting]; !set {
			return s.values.Path(vllm.SettingExtraArgs)
		}
	}
	return ""
}

// flagSetting names a vLLM flag for a hint: "`--max-model-len`
// (model.maxModelLen, now 4096)", or without a values path "`--max-model-len`
// (now 4096)"; unset is what is said when the pod does not pass the flag
// ("not set: the model's full context").
func (s *serverSpec) flagSetting(flag, unset string) string {
	return paren("`--"+flag+"`", s.valuesPath(flag), s.now(flag, unset))
}

// gpuSetting names the container's GPU count: "`gpu` (resources.gpu, now
// 1)" where the chart maps it, else "the container's nvidia.com/gpu (now
// 1)".
func (s *serverSpec) gpuSetting() string {
	if p := s.values.Path(vllm.SettingGPU); p != "" {
		return paren("`gpu`", p, s.gpuNow())
	}
	return paren("the container's `nvidia.com/gpu`", "", s.gpuNow())
}

// gpuName is what the hints call the container's GPU count: `gpu` (with
// its values path) or the container's nvidia.com/gpu.
func (s *serverSpec) gpuName() string {
	if p := s.values.Path(vllm.SettingGPU); p != "" {
		return fmt.Sprintf("`gpu` (%s)", p)
	}
	return "the container's `nvidia.com/gpu`"
}

// addFlag says where a flag the pod does not pass is added: "to
// extraArgs" where the chart maps its extra arguments, else "to the
// server's command line".
func (s *serverSpec) addFlag() string {
	if p := s.values.Path(vllm.SettingExtraArgs); p != "" {
		return "to " + p
	}
	return "to the server's command line"
}

// via is " (PATH)" for a setting the chart maps, "" otherwise: to name a
// value path after a setting's description.
func (s *serverSpec) via(setting string) string {
	if p := s.values.Path(setting); p != "" {
		return " (" + p + ")"
	}
	return ""
}

// paren is "name (path, now)", leaving out what is empty.
func paren(name, path, now string) string {
	switch {
	case path != "" && now != "":
		return fmt.Sprintf("%s (%s, %s)", name, path, now)
	case path != "":
		return fmt.Sprintf("%s (%s)", name, path)
	case now != "":
		return fmt.Sprintf("%s (%s)", name, now)
	}
	return name
}
