// Package helmrecords reads a Helm release's records from the cluster, as
// Helm's storage drivers write them (Secrets of type helm.sh/release.v1
// named sh.helm.release.v1.NAME.vN, or ConfigMaps with the ConfigMap
// driver: the release as JSON, gzipped, base64-encoded, labelled
// owner=helm, name=NAME, status, version), and turns them into vllmctl
// records for `vllmctl adopt`.
//
// The package owns the decoding (Helm's own format, read without Helm's
// storage driver, which skips records it cannot decode where adopt must
// name them), the mapping of a Helm revision to a vllmctl record, and the
// marking of Helm's records as adopted (their owner label changed, so that
// helm no longer finds them and refuses to act on the release by mistake)
// or their removal.
//
// It does not import package release (release imports it).
package helmrecords
