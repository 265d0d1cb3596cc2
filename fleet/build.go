package fleet

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/release"
)

// DefaultNamespace is a target's release namespace when neither the fleet
// file nor the target's kubeconfig context names one.
const DefaultNamespace = "default"

// KubeconfigError is a kubeconfig the fleet's targets cannot be read
// from (exit code 2): the fleet file's target names the context.
type KubeconfigError struct {
	Path, Target string
	Err          error
}

func (e *KubeconfigError) Error() string {
	return fmt.Sprintf("fleet file %s: target %s: kubeconfig: %v", e.Path, e.Target, e.Err)
}

// Unwrap returns the kubeconfig's error.
func (e *KubeconfigError) Unwrap() error { return e.Err }

// ExitCode is 2: invalid input, nothing applied.
func (e *KubeconfigError) ExitCode() int { return exitcode.Invalid }

// ResolveTargets checks that every target's context is in the kubeconfig
// and settles its namespace: the file's, else the context's, else
// DefaultNamespace. kubeconfig returns the kubeconfig loader of a context
// (cmd/vllmctl: its connection flags with that context). A context the
// kubeconfig does not have is a problem of the file (a *FileError with
// every such target's line); a kubeconfig that cannot be read is a
// *KubeconfigError. Both are exit code 2.
func (f *File) ResolveTargets(kubeconfig func(kubeContext string) clientcmd.ClientConfig) error {
	var problems []Problem
	for i, t := range f.Targets {
		loader := kubeconfig(t.Context)
		raw, err := loader.RawConfig()
		if err != nil {
			return &KubeconfigError{Path: f.Path, Target: t.Name, Err: err}
		}
		if _, ok := raw.Contexts[t.Context]; !ok {
			problems = append(problems, Problem{Line: t.Line, Field: fmt.Sprintf("targets[%d].context", i), Message: fmt.Sprintf("%q: no such context in the kubeconfig", t.Context)})
			continue
		}
		if t.Namespace == "" {
			ns, _, err := loader.Namespace()
			if err != nil || ns == "" {
				ns = DefaultNamespace
			}
			f.Targets[i].Namespace = ns
		}
	}
	if len(problems) > 0 {
		return &FileError{Path: f.Path, Problems: problems}
	}
	return nil
}

// ChartRef is the CHART of the fleet's deploys: the file's chart, where a
// relative path names a local chart next to the fleet file when there is
// one (else it is left as written: a repository chart, REPO/NAME, or a
// path relative to the working directory).
func (f *File) ChartRef() string {
	ref := f.Chart
	if ref == "" || filepath.IsAbs(ref) {
		return ref
	}
	if p := filepath.Join(filepath.Dir(f.Path), ref); exists(p) {
		return p
	}
	return ref
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// EngineFunc builds the release engine of a target (its context and its
// resolved namespace): cmd/vllmctl's is built on the kubeconfig's factory
// and prints the target's progress.
type EngineFunc func(t TargetSpec) (*release.Engine, error)

// BuildTargets builds a ReleaseTarget per target of f (after
// ResolveTargets): engine's engine and the deploy options of the target,
// which are deploy (the options every target shares; Render the fleet's
// chart, loaded once) with the release name of f, the target's namespace,
// the shared values files and --set values then the target's, and the
// automatic rollback on (a fleet always restores a target that fails).
// An error names the target and its context.
func BuildTargets(f *File, deploy release.DeployOptions, engine EngineFunc) (map[string]Target, error) {
	targets := make(map[string]Target, len(f.Targets))
	for _, t := range f.Targets {
		e, err := engine(t)
		if err != nil {
			return nil, fmt.Errorf("fleet target %s (context %s): %w", t.Name, t.Context, err)
		}
		targets[t.Name] = &ReleaseTarget{Engine: e, Options: f.deployOptions(t, deploy)}
	}
	return targets, nil
}

// deployOptions are the deploy options of target t: deploy with the
// release, the namespace and the values of t.
func (f *File) deployOptions(t TargetSpec, deploy release.DeployOptions) release.DeployOptions {
	opts := deploy
	opts.Name = f.Release
	opts.Render.Options.Namespace = t.Namespace
	opts.Render.Options.ValueFiles = append(append([]string(nil), f.Values...), t.Values...)
	opts.Render.Options.Set = append(append([]string(nil), f.Set...), t.Set...)
	opts.RollbackOnFailure = true
	return opts
}
