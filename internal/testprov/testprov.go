// Package testprov signs packaged charts for the provenance (--verify)
// tests as `helm package --sign` does (Helm's pkg/action Package.Clearsign:
// provenance.Signatory.ClearSign of the .tgz under its base name, with the
// chart's metadata), with an OpenPGP key generated at run time. Only
// tests import it.
package testprov

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/provenance"
	"sigs.k8s.io/yaml"
)

// Key is a generated signing key and the public keyring holding it.
type Key struct {
	// Entity holds the private key.
	Entity *openpgp.Entity
	// Keyring is the path of a binary public keyring (as GnuPG's
	// pubring.gpg) with this key only.
	Keyring string
	// Identity is the key's user id, "Name (comment) <email>".
	Identity string
}

// NewKey generates an OpenPGP key for name <email> and writes its public
// keyring into dir.
func NewKey(t testing.TB, dir, name, email string) *Key {
	t.Helper()
	e, err := openpgp.NewEntity(name, "", email, nil)
	require.NoError(t, err)
	keyring := filepath.Join(dir, name+".gpg")
	f, err := os.Create(keyring)
	require.NoError(t, err)
	require.NoError(t, e.Serialize(f))
	require.NoError(t, f.Close())
	var id string
	for n := range e.Identities {
		id = n
	}
	return &Key{Entity: e, Keyring: keyring, Identity: id}
}

// Sign writes the provenance file of the packaged chart tgz, tgz+".prov",
// as `helm package --sign` does, and returns its path.
func (k *Key) Sign(t testing.TB, tgz string) string {
	t.Helper()
	ch, err := loader.LoadFile(tgz)
	require.NoError(t, err)
	meta, err := yaml.Marshal(ch.Metadata)
	require.NoError(t, err)
	archive, err := os.ReadFile(tgz)
	require.NoError(t, err)
	sig, err := (&provenance.Signatory{Entity: k.Entity}).ClearSign(archive, filepath.Base(tgz), meta)
	require.NoError(t, err)
	prov := tgz + ".prov"
	require.NoError(t, os.WriteFile(prov, []byte(sig), 0o644))
	return prov
}

// Keyring writes a public keyring holding keys into dir/name and returns
// its path.
func Keyring(t testing.TB, dir, name string, keys ...*Key) string {
	t.Helper()
	p := filepath.Join(dir, name)
	f, err := os.Create(p)
	require.NoError(t, err)
	for _, k := range keys {
		require.NoError(t, k.Entity.Serialize(f))
	}
	require.NoError(t, f.Close())
	return p
}
