package main

import (
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
)

// maxKubeconfigBytes caps a kubeconfig file: client-go reads each whole,
// so a file that never ends (/dev/zero) or a huge one would take all the
// memory. Real ones are kilobytes; a few hundred contexts with embedded
// certificates stay under a megabyte.
const maxKubeconfigBytes = 16 << 20

// checkKubeconfigFiles refuses (exit 2, naming the file) a kubeconfig that
// client-go would read without end: explicit (--kubeconfig), else each
// file of $KUBECONFIG, else ~/.kube/config, that is neither a regular file
// of at most maxKubeconfigBytes nor a pipe (--kubeconfig <(…), which can
// be read only once, so it is not measured first). Missing files are left
// to client-go, which knows which may be missing.
func checkKubeconfigFiles(explicit string) error {
	var paths []string
	switch {
	case explicit != "":
		paths = []string{explicit}
	case os.Getenv(clientcmd.RecommendedConfigPathEnvVar) != "":
		paths = filepath.SplitList(os.Getenv(clientcmd.RecommendedConfigPathEnvVar))
	default:
		paths = []string{clientcmd.RecommendedHomeFile}
	}
	for _, p := range paths {
		if p == "" {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		switch mode := fi.Mode(); {
		case mode&os.ModeNamedPipe != 0:
		case !mode.IsRegular():
			return newUsageError("kubeconfig %s: not a regular file (%s)", p, mode.Type())
		case fi.Size() > maxKubeconfigBytes:
			return newUsageError("kubeconfig %s: %d bytes, over the %d MiB a kubeconfig may have", p, fi.Size(), maxKubeconfigBytes>>20)
		}
	}
	return nil
}

// kubeconfigFlag is --kubeconfig's value ("" when not given).
func kubeconfigFlag(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
