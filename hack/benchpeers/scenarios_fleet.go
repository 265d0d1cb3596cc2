// scenarios_fleet.go holds the fleet scenarios: a wave of 3 targets against one target alone.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// fleetSlot is one target's way to its cluster: a context of the fleet
// kubeconfig behind a counting proxy of its own, so that requests are
// counted per target even when two targets share a cluster.
type fleetSlot struct {
	name    string // the target's name, and its context in the bench's fleet kubeconfig
	context string // its context in the fleet kubeconfig (-fleet-kubeconfig)
	client  kubernetes.Interface
	proxy   *proxy
}

const (
	fleetImage    = "example.com/vllm:"
	fleetTag      = "v1"
	fleetNewTag   = "v2"
	fleetTimeout  = "5m"
	oneTarget     = "one-target"
	waveOfThree   = "wave-of-3"
	fleetReadyMsg = "pods Ready after the chart's readyDelay (1s)"
)

// fleetSetup starts a proxy per slot (a1: local-a, b1: local-b, a2:
// local-a) and writes the bench's fleet kubeconfig, one context per slot.
func (b *bench) fleetSetup(ctx context.Context) ([]*fleetSlot, string, error) {
	slots := []*fleetSlot{{name: "a1", context: "local-a"}, {name: "b1", context: "local-b"}, {name: "a2", context: "local-a"}}
	var kc strings.Builder
	kc.WriteString("apiVersion: v1\nkind: Config\nusers:\n- name: bench\n  user: {token: benchpeers}\nclusters:\n")
	for _, s := range slots {
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: b.o.fleetKubeconfig},
			&clientcmd.ConfigOverrides{CurrentContext: s.context}).ClientConfig()
		if err != nil {
			return nil, "", fmt.Errorf("fleet kubeconfig %s, context %s: %w", b.o.fleetKubeconfig, s.context, err)
		}
		direct := rest.CopyConfig(cfg)
		direct.QPS, direct.Burst = 200, 400
		if s.client, err = kubernetes.NewForConfig(direct); err != nil {
			return nil, "", err
		}
		if _, err := s.client.Discovery().ServerVersion(); err != nil {
			return nil, "", fmt.Errorf("context %s of %s does not answer (make cluster-b): %w", s.context, b.o.fleetKubeconfig, err)
		}
		if s.proxy, err = startProxy(cfg); err != nil {
			return nil, "", err
		}
		progress("fleet: target %s: proxy on https://%s in front of %s (%s)", s.name, s.proxy.addr, cfg.Host, s.context)
		fmt.Fprintf(&kc, "- name: %s\n  cluster: {server: \"https://%s\", insecure-skip-tls-verify: true}\n", s.name, s.proxy.addr)
	}
	kc.WriteString("contexts:\n")
	for _, s := range slots {
		fmt.Fprintf(&kc, "- name: %[1]s\n  context: {cluster: %[1]s, user: bench}\n", s.name)
	}
	kc.WriteString("current-context: a1\n")
	path := b.file("fleet-kubeconfig")
	if err := os.WriteFile(path, []byte(kc.String()), 0o600); err != nil {
		return nil, "", err
	}
	// Warm vllmctl's discovery cache of each proxy's address (`list` reads
	// no discovery): an unmeasured install and upgrade of the wave.
	var install run
	var installErr error
	if _, err := b.fleetRun(ctx, path, 0, slots, &install, &installErr); err != nil {
		return nil, "", fmt.Errorf("fleet warm-up run: %w", err)
	}
	return slots, path, nil
}

// fleet: the fleet scenarios. Per run and tool (one-target: slot a1
// alone; wave-of-3: a1, b1, a2 in one wave, maxParallel the default 3),
// fresh namespaces, then a measured `vllmctl fleet deploy` installing the
// release and one upgrading it (a new greeting and image: the pods roll).
func (b *bench) fleet(ctx context.Context) error {
	slots, kubeconfig, err := b.fleetSetup(ctx)
	if err != nil {
		return err
	}
	defer func() {
		for _, s := range slots {
			_ = s.proxy.server.Close()
		}
	}()
	title := "`vllmctl fleet deploy` of e2e/testdata/relchart (1 replica, " + fleetReadyMsg + "), %s: " +
		"one target (local-a) vs a wave of 3 (local-a, local-b, local-a; maxParallel 3), each target behind its own proxy"
	install := newScenario("fleet-install", fmt.Sprintf(title, "install in fresh namespaces"), waveOfThree, oneTarget)
	upgrade := newScenario("fleet-upgrade", fmt.Sprintf(title, "upgrade (--set greeting, image "+fleetTag+" to "+fleetNewTag+")"), waveOfThree, oneTarget)
	install.perTarget, upgrade.perTarget = true, true
	for i := 1; i <= b.o.runs; i++ {
		for _, tool := range install.tools {
			targets := slots
			if tool == oneTarget {
				targets = slots[:1]
			}
			var ri run
			var errI error
			ru, errU := b.attempt(ctx, "fleet", func() (run, error) {
				ri, errI = run{}, nil
				return b.fleetRun(ctx, kubeconfig, i, targets, &ri, &errI)
			})
			if ctx.Err() != nil {
				return ctx.Err()
			}
			b.add(install, tool, ri, errI)
			if errI == nil {
				b.add(upgrade, tool, ru, errU)
			}
		}
	}
	b.finish(install)
	b.finish(upgrade)
	return nil
}

// fleetRun is one run of the targets: it creates a namespace per target,
// measures the install (into *install, *installErr) and returns the
// measured upgrade; the namespaces are deleted afterwards.
func (b *bench) fleetRun(ctx context.Context, kubeconfig string, i int, targets []*fleetSlot, install *run, installErr *error) (run, error) {
	nss := make([]string, len(targets))
	defer func() {
		for j, ns := range nss {
			if ns != "" {
				if err := b.deleteNamespace(ctx, ns); err != nil {
					progress("fleet: %v", err)
				}
			}
			nss[j] = ""
		}
	}()
	for j, s := range targets {
		ns, err := b.namespaceOn(ctx, s.client, "fleet-"+s.name)
		if err != nil {
			*installErr = err
			return run{}, err
		}
		nss[j] = ns
	}
	file := b.file("fleet.yaml")
	if err := b.writeFleetFile(file, targets, nss, "image="+fleetImage+fleetTag); err != nil {
		*installErr = err
		return run{}, err
	}
	*install, *installErr = b.measureFleet(ctx, kubeconfig, file, targets, nss, fleetTag)
	if *installErr != nil {
		return run{}, *installErr
	}
	err := b.writeFleetFile(file, targets, nss, fmt.Sprintf("greeting=run-%d", i), "image="+fleetImage+fleetNewTag)
	if err != nil {
		return run{}, err
	}
	return b.measureFleet(ctx, kubeconfig, file, targets, nss, fleetNewTag)
}

// writeFleetFile writes the fleet file of targets (their namespaces nss),
// one wave, the shared --set values set.
func (b *bench) writeFleetFile(path string, targets []*fleetSlot, nss []string, set ...string) error {
	var f strings.Builder
	fmt.Fprintf(&f, "release: %s\nchart: %q\nset:\n", release, b.o.relChart)
	for _, s := range set {
		fmt.Fprintf(&f, "  - %q\n", s)
	}
	f.WriteString("targets:\n")
	names := make([]string, len(targets))
	for j, s := range targets {
		fmt.Fprintf(&f, "  - {name: %s, context: %s, namespace: %s}\n", s.name, s.name, nss[j])
		names[j] = s.name
	}
	fmt.Fprintf(&f, "waves:\n  - [%s]\n", strings.Join(names, ", "))
	return os.WriteFile(path, []byte(f.String()), 0o644)
}

// measureFleet runs `vllmctl fleet deploy file` with every target's proxy
// counters reset first; the run's requests are the targets' sum, and each
// target's own count is in PerTarget. Every target must end deployed and
// its Deployment rolled out on image tag tag.
func (b *bench) measureFleet(ctx context.Context, kubeconfig, file string, targets []*fleetSlot, nss []string, tag string) (run, error) {
	for _, s := range targets {
		s.proxy.reset()
	}
	argv := []string{b.o.vllmctl, "fleet", "deploy", file, "--kubeconfig", kubeconfig, "--timeout", fleetTimeout, "-o", "json"}
	start := time.Now()
	res := b.exec(ctx, argv)
	r := run{Seconds: time.Since(start).Seconds(), ExitCode: res.exit, stdout: res.stdout,
		MaxRSSMiB: float64(res.maxRSSKiB) / 1024, CPUSeconds: res.cpu.Seconds(), PerTarget: map[string]int64{}, byKey: map[string]int{}}
	for _, s := range targets {
		c := s.proxy.take()
		r.Requests += c.requests
		r.Watches += c.watches
		r.BytesRead += c.bytes
		r.PerTarget[s.name] = c.requests
		if len(targets) == 1 || s == targets[0] {
			// The per-path counts of the first target (the same for each).
			r.byKey = c.byKey
		}
	}
	if res.exit != 0 {
		return r, fmt.Errorf("%s: exit %d:\n%s%s", strings.Join(shortArgv(argv), " "), res.exit, tail(res.stdout, 5), tail(res.stderr, 15))
	}
	var doc struct {
		Targets []struct {
			Name    string `json:"name"`
			Outcome string `json:"outcome"`
		} `json:"targets"`
	}
	if err := json.Unmarshal(res.stdout, &doc); err != nil {
		return r, fmt.Errorf("fleet result document: %w: %s", err, tail(res.stdout, 5))
	}
	var deployed []string
	for _, t := range doc.Targets {
		if t.Outcome == "deployed" {
			deployed = append(deployed, t.Name)
		}
	}
	for j, s := range targets {
		if !slices.Contains(deployed, s.name) {
			return r, fmt.Errorf("fleet deploy: target %s not deployed: %s", s.name, tail(res.stdout, 20))
		}
		if err := rolledOutOn(ctx, s.client, nss[j], tag); err != nil {
			return r, err
		}
	}
	return r, ctx.Err()
}
