// release.go holds the generated values files and chart, and the commands deploying the release.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Paths of the generated files.
func (b *bench) file(name string) string { return filepath.Join(b.dir, name) }

// writeFiles writes the values files and the ConfigMap-only chart.
func (b *bench) writeFiles() error {
	pool := fmt.Sprintf(`nodeSelector:
  vllmctl.io/pool: %[1]s
tolerations:
  - {key: vllmctl.io/pool, operator: Equal, value: %[1]s, effect: NoSchedule}
  - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
`, b.pool)
	files := map[string]string{
		// The healthy and failure scenarios: 3 small 1-GPU pods.
		"values.yaml": `replicaCount: 3
image: {tag: ` + goodTag + `}
resources:
  gpu: 1
  requests: {cpu: 500m, memory: 1Gi}
  limits: {cpu: 500m, memory: 1Gi}
strategy: {maxSurge: 1, maxUnavailable: 0}
podAnnotations:
  sim.vllmctl.io/ready-delay: 2s
` + pool,
		// The large scenario: many tiny pods without GPUs on their own nodes.
		"large.yaml": fmt.Sprintf(`replicaCount: %d
image: {tag: %s}
resources:
  gpu: 0
  requests: {cpu: 10m, memory: 16Mi}
  limits: {cpu: 10m, memory: 16Mi}
shm: {enabled: false}
strategy: {maxSurge: 25%%, maxUnavailable: 0}
podAnnotations:
  sim.vllmctl.io/ready-delay: 1s
nodeSelector:
  vllmctl.io/pool: %[3]s-large
tolerations:
  - {key: vllmctl.io/pool, operator: Equal, value: %[3]s-large, effect: NoSchedule}
`, b.o.largeReplicas, goodTag, b.pool),
		"cm/Chart.yaml":  "apiVersion: v2\nname: cm\nversion: 0.1.0\nappVersion: \"1\"\n",
		"cm/values.yaml": "data:\n  greeting: hello\n",
		"cm/templates/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
  namespace: {{ .Release.Namespace }}
data:
  {{- toYaml .Values.data | nindent 2 }}
`,
	}
	for name, content := range files {
		path := b.file(name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Commands of the vllm chart release in ns with values file values and
// extra --set values.

func (b *bench) vllmctlDeploy(ns, values string, set ...string) step {
	argv := []string{b.o.vllmctl, "deploy", release, b.o.chart, "-n", ns, "-f", values, "--timeout", budget.String(), "-o", "json"}
	for _, s := range set {
		argv = append(argv, "--set", s)
	}
	return cmd(argv...)
}

func (b *bench) helmUpgrade(ns, values string, extra []string, set ...string) step {
	argv := []string{b.o.helm, "upgrade", "--install", release, b.o.chart, "-n", ns, "-f", values}
	argv = append(argv, extra...)
	for _, s := range set {
		argv = append(argv, "--set", s)
	}
	return cmd(argv...)
}

// render writes the chart rendered by `vllmctl template` (the same chart
// and values) for kubectl, and returns the file's path.
func (b *bench) render(ctx context.Context, ns, values string, set ...string) (string, error) {
	args := []string{"-f", values}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return b.renderChart(ctx, b.o.chart, ns, args...)
}

// renderChart writes chart rendered by `vllmctl template` with the extra
// arguments args (values) for kubectl, and returns the file's path.
func (b *bench) renderChart(ctx context.Context, chart, ns string, args ...string) (string, error) {
	argv := append([]string{b.o.vllmctl, "template", release, chart, "-n", ns}, args...)
	res := b.exec(ctx, argv)
	if res.exit != 0 {
		return "", fmt.Errorf("vllmctl template: exit %d: %s", res.exit, tail(res.stderr, 10))
	}
	f, err := os.CreateTemp(b.dir, "rendered-*.yaml")
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.Write(res.stdout); err != nil {
		return "", err
	}
	return f.Name(), nil
}

func (b *bench) kubectlApply(ns, file string) []step {
	return []step{
		cmd(b.o.kubectl, "apply", "--server-side", "-n", ns, "-f", file),
		cmd(b.o.kubectl, "rollout", "status", "deployment/"+release, "-n", ns, "--timeout", budget.String()),
	}
}

// install deploys the vllm release in ns with tool (unmeasured).
func (b *bench) install(ctx context.Context, tool, ns, values string, set ...string) error {
	switch tool {
	case "kubectl":
		file, err := b.render(ctx, ns, values, set...)
		if err != nil {
			return err
		}
		return b.setup(ctx, b.kubectlApply(ns, file)...)
	case "helm":
		return b.setup(ctx, b.helmUpgrade(ns, values, []string{"--wait", "--timeout", budget.String()}, set...))
	default:
		return b.setup(ctx, b.vllmctlDeploy(ns, values, set...))
	}
}

// upgrade is the measured upgrade of the vllm release in ns with tool.
func (b *bench) upgrade(ctx context.Context, tool, ns, values string, set ...string) (run, error) {
	switch tool {
	case "kubectl":
		file, err := b.render(ctx, ns, values, set...)
		if err != nil {
			return run{}, err
		}
		return b.measure(ctx, b.kubectlApply(ns, file)...)
	case "helm":
		return b.measure(ctx, b.helmUpgrade(ns, values, []string{"--wait", "--timeout", budget.String()}, set...))
	default:
		return b.measure(ctx, b.vllmctlDeploy(ns, values, set...))
	}
}

// fresh runs fn in a fresh namespace and deletes it afterwards.
func (b *bench) fresh(ctx context.Context, prefix string, fn func(ns string) (run, error)) (run, error) {
	ns, err := b.namespace(ctx, prefix)
	if err != nil {
		return run{}, err
	}
	r, err := fn(ns)
	if derr := b.deleteNamespace(ctx, ns); derr != nil && err == nil {
		err = derr
	}
	return r, err
}

// deployResult is the part of vllmctl's result document checked here.
type deployResult struct {
	Revision     int    `json:"revision"`
	Status       string `json:"status"`
	RolledBackTo int    `json:"rolledBackTo"`
}

func parseResult(out []byte) (deployResult, error) {
	var d deployResult
	if err := json.Unmarshal(out, &d); err != nil {
		return d, fmt.Errorf("vllmctl result document: %w: %s", err, tail(out, 5))
	}
	return d, nil
}
