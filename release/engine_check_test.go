package release_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/storage"
)

// An operation run on an engine without what it needs says which field is
// missing, before it reads or writes anything.
func TestOperationsNameAMissingDependency(t *testing.T) {
	store := storage.NewMemory("ns")
	ctx := context.Background()
	cases := []struct {
		name string
		run  func(*release.Engine) error
		want string
	}{
		{"deploy without a store", func(e *release.Engine) error {
			_, err := e.Deploy(ctx, release.DeployOptions{Name: "web"})
			return err
		}, "no record store (Store) configured"},
		{"rollback without an object client", func(e *release.Engine) error {
			e.Store = store
			_, err := e.Rollback(ctx, release.RollbackOptions{Name: "web"})
			return err
		}, "no object client (Objects) configured"},
		{"uninstall without objects", func(e *release.Engine) error {
			e.Store = store
			_, err := e.Uninstall(ctx, release.UninstallOptions{Name: "web"})
			return err
		}, "no object client (Objects) configured"},
		{"nil engine", func(*release.Engine) error {
			_, err := (*release.Engine)(nil).Status(ctx, "web")
			return err
		}, "release engine: not configured"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run(&release.Engine{})
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}
