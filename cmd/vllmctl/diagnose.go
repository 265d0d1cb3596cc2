package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/termout"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/wait"
)

// diagnoseOptions are the inputs of `vllmctl diagnose POD` and `vllmctl
// diagnose --log FILE|-`.
type diagnoseOptions struct {
	g *GlobalOptions

	output outputFlags

	container string
	log       string
	logGiven  bool

	pod       string
	namespace string
}

func newDiagnoseCommand(g *GlobalOptions) *cobra.Command {
	o := &diagnoseOptions{g: g}
	cmd := &cobra.Command{
		Use:   "diagnose POD [-c CONTAINER] | --log FILE|-",
		Short: "Say why a vLLM container failed: cause, evidence, hints",
		Long: "Diagnose a pod of the cluster (deployed by vllmctl or not) as a failed rollout does: the container's\n" +
			"state and last termination, the pod's events, the log of its previous (and current) instance, the\n" +
			"cause in vLLM's terms (gpu-oom, kv-cache, model-auth, ...), the log line or event that decided it, and\n" +
			"hints naming the settings to change, quoting the pod's own flags. The container is -c's, else the\n" +
			"first failing one, else the first.\n\n" +
			"With --log FILE (or --log - for stdin) it classifies a log alone, offline: cause, evidence and hints\n" +
			"(without a pod's flags). Only the last 4 MiB of the log are read.\n\n" +
			"Exit status: 0 a cause was named, 1 no known cause (unknown; the diagnosis is printed all the same),\n" +
			"2 invalid input (no such pod or container, bad flags), 6 the cluster refused.",
		Example: "  vllmctl diagnose chat-7d9f8c6b5-x2k4q -n inference\n" +
			"  vllmctl diagnose chat-7d9f8c6b5-x2k4q -c server -o json\n" +
			"  kubectl logs chat-7d9f8c6b5-x2k4q --previous | vllmctl diagnose --log -",
		Args: cobra.MaximumNArgs(1),
		RunE: runCommand(o),
	}
	f := cmd.Flags()
	o.output.AddFlags(f)
	f.StringVarP(&o.container, "container", "c", "", "the container to diagnose (default: the first failing one, else the first)")
	f.StringVar(&o.log, "log", "", "classify this log file instead of a pod's (- reads stdin)")
	return cmd
}

// Complete takes the pod or the log, and the namespace of a pod.
func (o *diagnoseOptions) Complete(cmd *cobra.Command, args []string) error {
	o.logGiven = cmd.Flags().Changed("log")
	if len(args) == 1 {
		o.pod = args[0]
	}
	if o.logGiven || o.pod == "" {
		return nil
	}
	ns, err := recordNamespace(o.g)
	if err != nil {
		return err
	}
	o.namespace = ns
	return nil
}

// Validate requires exactly one of POD and --log.
func (o *diagnoseOptions) Validate() error {
	switch {
	case o.logGiven && o.pod != "":
		return newUsageError("give a POD or --log, not both")
	case !o.logGiven && o.pod == "":
		return newUsageError("give the POD to diagnose, or --log FILE (- for stdin)")
	case o.logGiven && o.log == "":
		return newUsageError("--log needs a file name, or - for stdin")
	case o.logGiven && o.container != "":
		return newUsageError("-c/--container names a container of a POD: not with --log")
	}
	return o.output.Validate()
}

// Run diagnoses and prints the diagnosis; a cause unknown is exit code 1.
func (o *diagnoseOptions) Run(ctx context.Context) error {
	var d *rollout.Diagnosis
	var err error
	if o.logGiven {
		d, err = o.diagnoseLog()
	} else {
		d, err = o.diagnosePod(ctx)
	}
	if err != nil {
		return err
	}
	if o.output.format == "table" {
		err = termout.WriteDiagnosisOnDemand(o.g.Streams.Out, d)
	} else {
		err = writeRecordDocument(o.g.Streams.Out, o.output.format, d)
	}
	if err != nil {
		return err
	}
	if d.Cause == vllmcause.CauseUnknown || d.Cause == "" {
		return unknownCauseError{}
	}
	return nil
}

func (o *diagnoseOptions) diagnosePod(ctx context.Context) (*rollout.Diagnosis, error) {
	client, err := o.g.Factory.KubernetesClientSet()
	if err != nil {
		return nil, err
	}
	// The hints name the values paths of the pod's chart where it maps
	// them (a vllmctl release's recorded chart), else flags only; the
	// release's Secrets are withheld from what the pod printed.
	// A LeaderWorkerSet's pods are followed up to it with the dynamic
	// client; without one (best effort), to its StatefulSets only.
	dyn, _ := o.g.Factory.DynamicClient()
	values := release.PodChartValues(ctx, client, dyn, o.namespace, o.pod, o.g.Redactor)
	d, err := wait.DiagnosePod(ctx, client, o.namespace, o.pod, o.container, wait.RolloutOptions{Values: values})
	if err == nil {
		// gpu-oom and kv-cache: what the model-fit arithmetic says of the
		// pod's flags (best effort, from the Hub as deploy reads it).
		var mf modelFitFlags
		if h := modelFitHint(ctx, client, d, mf.source()); h != "" {
			d.Hints = append(d.Hints, h)
		}
	}
	return d, err
}

func (o *diagnoseOptions) diagnoseLog() (*rollout.Diagnosis, error) {
	var r io.Reader = o.g.Streams.In
	if o.log != "-" {
		f, err := os.Open(o.log)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, usageError{fmt.Errorf("--log: %w", err)}
			}
			return nil, fmt.Errorf("--log: %w", err)
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.IsDir() {
			return nil, newUsageError("--log %s: is a directory, not a log file", o.log)
		}
		r = f
	}
	if r == nil {
		return nil, newUsageError("--log -: no standard input")
	}
	d, err := wait.DiagnoseLog(r, wait.RolloutOptions{})
	if err != nil {
		return nil, fmt.Errorf("--log %s: %w", o.log, err)
	}
	return d, nil
}

// unknownCauseError is diagnose's outcome when no rule named a cause (exit
// code 1); the diagnosis is printed on stdout all the same.
type unknownCauseError struct{}

func (unknownCauseError) Error() string {
	return "no known cause was found (cause unknown): see the events, log tail and hints above"
}
func (unknownCauseError) ExitCode() int { return exitUnknownCause }

// exitUnknownCause is diagnose's exit code when the cause is unknown.
const exitUnknownCause = 1
