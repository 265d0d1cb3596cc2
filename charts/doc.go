// Package charts loads charts (from a directory or from the built-in charts
// embedded in this package), merges values in Helm's order, validates them
// against values.schema.json, renders templates with Helm v4's engine, and
// turns the result into labelled, deterministically sorted objects. It never
// talks to a cluster.
//
// Subcharts (charts/ directories and .tgz archives) are processed by Helm's
// own chartutil.ProcessDependencies on a copy of the chart (deps.go): a
// dependency missing from charts/ is left out with a warning when Helm's
// rules disable it, and refused when they enable it. The CRDs of crds/ are
// parsed apart from the templates (crds.go). ListDependencies and
// UpdateDependencies (file:// repositories) back `vllmctl dependency`.
package charts
