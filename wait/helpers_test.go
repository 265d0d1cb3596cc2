package wait

import (
	"strings"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/termout"
	"github.com/vllmctl/vllmctl/internal/vllmcause/vllmcausetest"
)

// eventLine is ev's line as the plain printer prints it, without its
// timestamp (and without the line of its warning, if any).
func eventLine(ev rollout.Event) string {
	if ev.Rollout != nil {
		p := *ev.Rollout
		p.Warning = ""
		ev.Rollout = &p
	}
	var b strings.Builder
	if err := termout.NewPlainPrinter(&b).Print(ev); err != nil {
		return err.Error()
	}
	line, _, _ := strings.Cut(b.String(), "\n")
	_, line, _ = strings.Cut(line, " ")
	return line
}

// The classifier's test helpers, by the names the tests use.
var (
	chartPod = vllmcausetest.ChartPod
	setArg   = vllmcausetest.SetArg
	fixture  = vllmcausetest.Fixture

	builtinValues = vllmcausetest.BuiltinValues
)
