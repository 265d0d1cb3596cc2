package fleet

import (
	"context"
	"errors"
	"fmt"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/release/storage"
)

// waves maps each target name to its wave, 1-based.
func (r *Runner) waves() map[string]int {
	out := map[string]int{}
	for i, w := range r.file.Waves {
		for _, name := range w {
			out[name] = i + 1
		}
	}
	return out
}

// all runs fn on every target (Policy.MaxParallel at once, default all).
func (r *Runner) all(ctx context.Context, fn func(i int, t TargetSpec)) {
	idx := map[string]int{}
	names := make([]string, len(r.file.Targets))
	for i, t := range r.file.Targets {
		idx[t.Name], names[i] = i, t.Name
	}
	each(names, r.parallel(len(names)), func() bool { return ctx.Err() != nil }, func(name string) {
		fn(idx[name], r.file.Targets[idx[name]])
	})
}

// Diff computes, per target, what a deploy would change. The error, when
// a target could not be diffed, is an *Error with the worst of their
// exit codes; changes alone are no error (the result's Changes).
func (r *Runner) Diff(ctx context.Context) (*DiffResult, error) {
	res := &DiffResult{File: r.file.Path, Release: r.file.Release, Targets: make([]*TargetDiff, len(r.file.Targets))}
	waves := r.waves()
	for i, t := range r.file.Targets {
		res.Targets[i] = &TargetDiff{Name: t.Name, Context: t.Context, Namespace: t.Namespace, Wave: waves[t.Name]}
	}
	r.all(ctx, func(i int, t TargetSpec) {
		row := res.Targets[i]
		rep, err := r.targets[t.Name].Diff(ctx)
		if err != nil {
			row.Error, row.ExitCode = err.Error(), exitcode.Of(err)
			r.log(t.Name, "diff failed: %v", err)
			return
		}
		row.Report = rep
		if rep != nil && !rep.Empty() {
			row.Changes, row.ExitCode = true, exitcode.Changes
		}
	})
	return res, r.inspectErr(ctx, "diff", func(yield func(string, int)) {
		for _, row := range res.Targets {
			res.Changes = res.Changes || row.Changes
			if row.Error != "" {
				yield(row.Name, row.ExitCode)
			}
		}
	})
}

// Status reads, per target, the release's status. A target without
// records is "not-installed", no error.
func (r *Runner) Status(ctx context.Context) (*StatusResult, error) {
	res := &StatusResult{File: r.file.Path, Release: r.file.Release, Targets: make([]*TargetStatus, len(r.file.Targets))}
	waves := r.waves()
	for i, t := range r.file.Targets {
		res.Targets[i] = &TargetStatus{Name: t.Name, Context: t.Context, Namespace: t.Namespace, Wave: waves[t.Name]}
	}
	r.all(ctx, func(i int, t TargetSpec) {
		row := res.Targets[i]
		rep, err := r.targets[t.Name].Status(ctx)
		var nf *storage.NotFoundError
		switch {
		case errors.As(err, &nf):
			row.Status = "not-installed"
			return
		case err != nil:
			row.Error, row.ExitCode = err.Error(), exitcode.Of(err)
			row.Status = "unknown"
			r.log(t.Name, "status failed: %v", err)
			return
		}
		row.Revision, row.Status, row.Chart, row.AppVersion = rep.Revision, string(rep.Status), rep.Chart, rep.AppVersion
		row.Objects = len(rep.Objects)
		for _, o := range rep.Objects {
			if o.Status == "Current" {
				row.ReadyObjects++
			}
		}
		row.Ready = row.ReadyObjects == row.Objects
	})
	return res, r.inspectErr(ctx, "status", func(yield func(string, int)) {
		for _, row := range res.Targets {
			if row.Error != "" {
				yield(row.Name, row.ExitCode)
			}
		}
	})
}

// inspectErr is the error of a diff or status: the worst exit code of
// the targets that failed, naming them.
func (r *Runner) inspectErr(ctx context.Context, op string, failed func(func(string, int))) error {
	code := exitcode.OK
	var names []string
	failed(func(name string, c int) {
		names = append(names, name)
		code = Worst(code, c)
	})
	if ctx.Err() != nil && code == exitcode.OK {
		return &Error{Release: r.file.Release, Code: exitcode.Interrupted, Message: op + " interrupted", Err: ctx.Err()}
	}
	if len(names) == 0 {
		return nil
	}
	return &Error{Release: r.file.Release, Code: code, Message: fmt.Sprintf("%s failed on %d target(s): %v", op, len(names), names)}
}
