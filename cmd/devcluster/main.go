// Command devcluster is a multi-call binary holding the real control-plane
// components used by vllmctl's local cluster. It dispatches on the name it
// was called by (argv[0], usually a symlink): etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kubectl, kwok or kwokctl.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	kubectl "k8s.io/kubectl/pkg/cmd"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	"sigs.k8s.io/kwok/pkg/config"
	"sigs.k8s.io/kwok/pkg/log"
	"sigs.k8s.io/kwok/pkg/utils/signals"

	_ "sigs.k8s.io/kwok/pkg/kwokctl/runtime/binary"
)

func main() {
	name := filepath.Base(os.Args[0])
	args := os.Args[1:]
	if name == "devcluster" && len(args) > 0 {
		name, args = args[0], args[1:]
	}
	os.Exit(run(name, args))
}

func run(name string, args []string) int {
	switch name {
	case "etcd":
		etcdmain.Main(append([]string{"etcd"}, args...))
		return 0
	case "kube-apiserver":
		os.Args = append([]string{name}, args...)
		return cli.Run(apiserver.NewAPIServerCommand())
	case "kube-controller-manager":
		os.Args = append([]string{name}, args...)
		return cli.Run(controllermanager.NewControllerManagerCommand())
	case "kube-scheduler":
		os.Args = append([]string{name}, args...)
		return cli.Run(scheduler.NewSchedulerCommand())
	case "kubectl":
		os.Args = append([]string{name}, args...)
		if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
			// kubectl's own error printing and exit codes.
			cmdutil.CheckErr(err)
		}
		return 0
	case "kwok", "kwok-controller", "kwokctl":
		if name == "kwok-controller" {
			name = "kwok"
		}
		return runKwok(name, args)
	default:
		fmt.Fprintf(os.Stderr, "devcluster: unknown component %q (want etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok or kwokctl)\n", name)
		return 2
	}
}

// runKwok mirrors kwok's own main functions. Kubernetes registers a
// non-bool global --version flag on pflag.CommandLine, which kwok's command
// tree trips over, so the global flag set is reset first.
func runKwok(name string, args []string) int {
	pflag.CommandLine = pflag.NewFlagSet(name, pflag.ExitOnError)
	os.Args = append([]string{name}, args...)

	flagset := pflag.NewFlagSet("global", pflag.ContinueOnError)
	flagset.ParseErrorsAllowlist.UnknownFlags = true
	flagset.Usage = func() {}

	ctx := signals.SetupSignalContext()
	ctx, logger := log.InitFlags(ctx, flagset)
	ctx, err := config.InitFlags(ctx, flagset)
	if err != nil {
		_, _ = os.Stderr.Write([]byte(flagset.FlagUsages()))
		logger.Error("Init config flags", "err", err)
		return 1
	}
	command := newKwokCommand(ctx, name)
	command.PersistentFlags().AddFlagSet(flagset)
	command.SetArgs(args)
	if err := command.ExecuteContext(ctx); err != nil {
		logger.Error("Execute exit", "err", err)
		return 1
	}
	return 0
}
