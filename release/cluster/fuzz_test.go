package cluster

import (
	"testing"
)

// FuzzParseManifest: any stored manifest parses or fails; never panics.
func FuzzParseManifest(f *testing.F) {
	f.Add("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: b}\n")
	f.Add("kind: [\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, manifest string) {
		_, _ = ParseManifest(manifest)
	})
}
