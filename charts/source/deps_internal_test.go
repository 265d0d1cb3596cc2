package source

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"github.com/vllmctl/vllmctl/internal/exitcode"
)

// TestDependencyErrorClassifies: the errors Helm's downloader returns, as
// it wraps them, get exit code 6 (unreachable, refused) or 2 (not there),
// name the dependency, and lose the passwords of their URLs.
func TestDependencyErrorClassifies(t *testing.T) {
	reqs := []*chart.Dependency{
		{Name: "web", Version: "~1", Repository: "@models"},
		{Name: "db", Version: "~2", Repository: "oci://reg.example.com/charts"},
	}
	urls := map[string]string{"web": "https://u:secret@charts.example.com", "db": "oci://reg.example.com/charts"}
	tests := []struct {
		name string
		err  error
		code int
		msg  []string
	}{
		{"connection refused", fmt.Errorf("could not download https://u:secret@charts.example.com/web-1.0.0.tgz: %w",
			&url.Error{Op: "Get", URL: "https://u:secret@charts.example.com/web-1.0.0.tgz", Err: errors.New("connection refused")}),
			exitcode.Cluster, []string{"chart repository https://u:xxxxx@charts.example.com: update dependencies:", "connection refused"}},
		{"registry 401", fmt.Errorf("could not retrieve list of tags for repository oci://reg.example.com/charts: %w",
			&errcode.ErrorResponse{Method: http.MethodGet, URL: &url.URL{Scheme: "https", Host: "reg.example.com"}, StatusCode: http.StatusUnauthorized}),
			exitcode.Cluster, []string{"registry oci://reg.example.com/charts: update dependencies:"}},
		{"registry 404", fmt.Errorf("could not retrieve list of tags for repository oci://reg.example.com/charts: %w",
			&errcode.ErrorResponse{Method: http.MethodGet, URL: &url.URL{Scheme: "https", Host: "reg.example.com"}, StatusCode: http.StatusNotFound}),
			exitcode.Invalid, []string{"dependency db (repository oci://reg.example.com/charts):"}},
		{"HTTP status of a chart repository", errors.New("could not download https://u:secret@charts.example.com/web-1.0.0.tgz: failed to fetch https://u:secret@charts.example.com/web-1.0.0.tgz : 500 Internal Server Error"),
			exitcode.Cluster, []string{"500 Internal Server Error"}},
		{"Helm's resolver: no version", errors.New(`can't get a valid version for 1 subchart(s): "web" (repository "https://u:secret@charts.example.com", version "~1"). Make sure a matching chart version exists in the repo, or change the version constraint in Chart.yaml`),
			exitcode.Invalid, []string{"dependency web (repository https://u:xxxxx@charts.example.com):", `version "~1"`}},
		{"anything else", errors.New("something odd"), exitcode.Internal, []string{"chart ./app: something odd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := dependencyError("./app", reqs, urls, tt.err)
			assert.Equal(t, tt.code, exitcode.Of(err), err.Error())
			for _, m := range tt.msg {
				assert.Contains(t, err.Error(), m)
			}
			assert.NotContains(t, err.Error(), "secret")
		})
	}
}
