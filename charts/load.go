package charts

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
)

// Load loads the chart ref: the name of a built-in chart (see
// BuiltinCharts), the path of a chart directory, or the path of a packaged
// chart (a .tgz, as helm package writes it). A plain name that is a
// built-in chart always means the built-in chart; write a path with a slash
// ("./vllm") to load a directory of the same name. A ref that is neither
// yields an *InputError naming it and listing the built-in charts.
func Load(ref string) (*chart.Chart, error) {
	if ref == "" {
		ref = DefaultChart
	}
	if !strings.ContainsAny(ref, `/\`) && IsBuiltin(ref) {
		return loadBuiltin(ref)
	}
	fi, err := os.Stat(ref)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &InputError{
			Source: "chart", File: ref, Err: err,
			Msg: fmt.Sprintf("not a chart directory nor a built-in chart (built-in charts: %s)", strings.Join(BuiltinCharts(), ", ")),
		}
	case err != nil:
		return nil, &InputError{Source: "chart", File: ref, Msg: err.Error(), Err: err}
	case !fi.IsDir():
		// A packaged chart (helm package's .tgz), read by Helm's own
		// archive loader with its size limits.
		ch, err := loader.LoadFile(ref)
		if err != nil {
			return nil, &InputError{
				Source: "chart", File: ref, Err: err,
				Msg: fmt.Sprintf("not a chart directory nor a packaged chart (.tgz): %v", err),
			}
		}
		return ch, nil
	}
	ch, err := loader.LoadDir(ref)
	if err != nil {
		return nil, &InputError{Source: "chart", File: ref, Msg: err.Error(), Err: err}
	}
	return ch, nil
}
