// Package charts loads charts (from a directory or from the built-in charts
// embedded in this package), merges values in Helm's order, validates them
// against values.schema.json, renders templates with Helm v4's engine, and
// turns the result into labelled, deterministically sorted objects. It never
// talks to a cluster.
package charts
