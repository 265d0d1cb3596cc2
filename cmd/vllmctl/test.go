package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vllmctl/vllmctl/internal/termout"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/storage"
)

// testOptions are the inputs of `vllmctl test RELEASE`.
type testOptions struct {
	g        *GlobalOptions
	progress progressFlags
	verdicts verdictFlags
	output   outputFlags
	timeout  timeoutFlags
	serve    serveCheckFlags

	releaseTarget
}

func newTestCommand(g *GlobalOptions) *cobra.Command {
	o := &testOptions{g: g}
	o.timeout.help = "how long each test hook may take"
	cmd := &cobra.Command{
		Use:   "test RELEASE",
		Short: "Run the test hooks of a release's deployed revision",
		Long: "Run the test hooks (objects annotated helm.sh/hook: test, such as the test-connection Pod of every\n" +
			"chart `helm create` makes) of RELEASE's deployed revision, as `helm test` does: one after the other\n" +
			"by helm.sh/hook-weight, each deleted first (helm.sh/hook-delete-policy before-hook-creation, the\n" +
			"default) and waited for until it completes, with deploy's verdicts (a crash loop, an OOM kill, an image\n" +
			"that cannot be pulled fail it at once). The first test that fails ends the run; its pod, container,\n" +
			"reason, exit code, events and last log lines are printed. test takes no lock and writes no record.\n\n" +
			"Exit status: 0 every test passed (or there is none), 2 unknown release or no deployed revision,\n" +
			"4 a test failed, 6 the cluster refused.",
		Example: "  vllmctl test qwen -n inference\n" +
			"  vllmctl test qwen -o json --timeout 2m",
		Args: cobra.ExactArgs(1),
		RunE: runCommand(o),
	}
	f := cmd.Flags()
	o.progress.AddFlags(f)
	o.verdicts.AddFlags(f)
	o.output.AddFlags(f)
	o.timeout.AddFlags(f)
	o.serve.AddFlags(f)
	return cmd
}

// Complete resolves the release and the namespace.
func (o *testOptions) Complete(cmd *cobra.Command, args []string) error {
	o.timeout.Complete(cmd.Flags(), o.g)
	o.serve.Complete(cmd.Flags(), o.g)
	return o.releaseTarget.complete(o.g, args)
}

// Validate checks the release name and the flags.
func (o *testOptions) Validate() error {
	if err := storage.ValidateName(o.release); err != nil {
		return err
	}
	return validateAll(o.output.Validate, o.progress.Validate, o.verdicts.Validate, o.timeout.Validate, o.serve.Validate)
}

// Run runs the tests and prints their report.
func (o *testOptions) Run(ctx context.Context) error {
	engine, printer, err := openOperation(o.g, &o.progress, o.namespace, o.verdicts.options())
	if err != nil {
		return err
	}
	engine.ServeCheck = o.serve.options()
	res, err := engine.Test(ctx, release.TestOptions{Name: o.release, Timeout: o.timeout.timeout})
	return finishWith(printer, res != nil, func() error {
		if o.output.format != "table" {
			return writeRecordDocument(o.g.Streams.Out, o.output.format, res)
		}
		return writeTestReport(o.g.Streams.Out, res)
	}, err)
}

// writeTestReport prints one line per test hook, and the diagnosis of the
// one that failed.
func writeTestReport(w io.Writer, res *release.TestResult) error {
	var b strings.Builder
	fmt.Fprintf(&b, "RELEASE: %s\nNAMESPACE: %s\nREVISION: %d\n", res.Release, res.Namespace, res.Revision)
	if res.ServeCheck != nil {
		fmt.Fprintf(&b, "SERVE CHECK: %s\n", recordCell(serveCell(res.ServeCheck)))
	}
	if len(res.Tests) == 0 {
		b.WriteString("No test hooks.\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	b.WriteString("\n")
	tw := newRecordTable(&b)
	fmt.Fprintln(tw, "TEST\tKIND\tPHASE\tSTARTED\tDURATION")
	for _, t := range res.Tests {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", recordCell(t.Name), t.Kind, t.Phase,
			t.StartedAt.UTC().Format("2006-01-02T15:04:05Z"), t.CompletedAt.Sub(t.StartedAt).Round(1e6))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, t := range res.Tests {
		if t.Failure != nil {
			b.WriteString("\n")
			if err := termout.WriteDiagnosis(&b, t.Failure); err != nil {
				return err
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
