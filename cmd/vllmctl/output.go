package main

// Helpers every release command shares: the release namespace, output
// formats and table cells.

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/internal/termout"
	"github.com/vllmctl/vllmctl/release/storage"
)

// replicaSetsCell shows ReplicaSets as name(hash, rev N), comma-separated.
func replicaSetsCell(refs []storage.ReplicaSetRef) string {
	if len(refs) == 0 {
		return "<none>"
	}
	parts := make([]string, len(refs))
	for i, rs := range refs {
		parts[i] = fmt.Sprintf("%s(%s, rev %d)", rs.Name, rs.PodTemplateHash, rs.Revision)
	}
	return recordCell(strings.Join(parts, ", "))
}

// revisionsCell is replicaSetsCell followed by the ControllerRevisions
// of StatefulSets, as name(hash, rev N).
func revisionsCell(refs []storage.ReplicaSetRef, crs []storage.ControllerRevisionRef) string {
	if len(crs) == 0 {
		return replicaSetsCell(refs)
	}
	parts := make([]string, 0, len(refs)+len(crs))
	for _, rs := range refs {
		parts = append(parts, fmt.Sprintf("%s(%s, rev %d)", rs.Name, rs.PodTemplateHash, rs.Revision))
	}
	for _, cr := range crs {
		parts = append(parts, fmt.Sprintf("%s(%s, rev %d)", cr.Name, cr.Hash, cr.Revision))
	}
	return recordCell(strings.Join(parts, ", "))
}

// statusUnreadable is what list and history show for a record that
// cannot be decoded (it is no record status, docs/release-record.md).
const statusUnreadable storage.Status = "unreadable"

// recordNamespace is the namespace of -n/--namespace or the kubeconfig
// context.
func recordNamespace(g *GlobalOptions) (string, error) {
	if err := checkKubeconfigFiles(kubeconfigFlag(g.ConfigFlags.KubeConfig)); err != nil {
		return "", err
	}
	ns, _, err := g.ConfigFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", usageError{fmt.Errorf("kubeconfig: %w", err)}
	}
	return ns, validateNamespace(ns)
}

// validateNamespace refuses a namespace name Kubernetes cannot have
// (exit code 2), before any request.
func validateNamespace(ns string) error {
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return newUsageError("namespace %q is invalid: %s", ns, strings.Join(errs, "; "))
	}
	return nil
}

// colorOutput reports whether text for w gets ANSI colours: w is a
// terminal and NO_COLOR is unset.
func colorOutput(w io.Writer) bool {
	_, noColor := os.LookupEnv("NO_COLOR")
	return !noColor && termout.IsTerminal(w)
}

// kubeconfigError classifies an error building the REST config: a
// kubeconfig that names a context, cluster or user it does not have, or
// has none, is invalid input (exit 2); anything else means the cluster
// cannot be reached (exit 6).
func kubeconfigError(err error) error {
	err = fmt.Errorf("kubeconfig: %w", err)
	if clientcmd.IsConfigurationInvalid(err) || clientcmd.IsEmptyConfig(err) || unknownKubeconfigEntry.MatchString(err.Error()) {
		return usageError{err}
	}
	return recordClusterError{err}
}

// unknownKubeconfigEntry matches client-go's error for a --context,
// --cluster or --user the kubeconfig does not have (a plain error, not one
// clientcmd.IsConfigurationInvalid recognises).
var unknownKubeconfigEntry = regexp.MustCompile(`(context|cluster|auth info) ".*" does not exist`)

// recordClusterError marks a cluster that cannot be reached (exit 6).
type recordClusterError struct{ err error }

func (e recordClusterError) Error() string { return e.err.Error() }
func (e recordClusterError) Unwrap() error { return e.err }
func (e recordClusterError) ExitCode() int { return ExitClusterErr }

// validateRecordOutput checks -o/--output of history and list.
func validateRecordOutput(format string) error {
	switch format {
	case "table", "json", "yaml":
		return nil
	}
	return newUsageError("--output %q: want table, json or yaml", format)
}

// writeRecordDocument writes v as one JSON or YAML document. Written to
// the command's output (a diff.Writer), v's strings pass through its
// Redactor first (diff.RedactCopy), whatever fields v has.
func writeRecordDocument(w io.Writer, format string, v any) error {
	if rw, ok := w.(interface{ Redactor() *diff.Redactor }); ok {
		v = diff.RedactCopy(rw.Redactor(), v)
	}
	var out []byte
	var err error
	switch format {
	case "json":
		out, err = json.MarshalIndent(v, "", "  ")
		out = append(out, '\n')
	case "yaml":
		out, err = yaml.Marshal(v)
	default:
		return newUsageError("--output %q: want table, json or yaml", format)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// newRecordTable returns a tabwriter laid out like kubectl's tables.
func newRecordTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
}

// recordTime formats a table time in loc.
func recordTime(t time.Time, loc *time.Location) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return t.In(loc).Format("2006-01-02 15:04:05 MST")
}

// recordCell makes s fit a table cell: one line, no tabs, "<none>" when
// empty. Line breaks and runs of spaces become one space; everything else
// goes through termout.SanitizeLine (controls escaped, valid UTF-8, clipped):
// records and statuses quote the cluster and the containers' logs.
func recordCell(s string) string {
	if s == "" {
		return "<none>"
	}
	return strings.Join(strings.Fields(termout.SanitizeLine(strings.ReplaceAll(s, "\n", " "))), " ")
}
