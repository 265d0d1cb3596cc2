package release

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/wait"
)

// DeployOptions are the inputs of one deploy of a rendered chart.
type DeployOptions struct {
	// Name is the release name.
	Name string
	// Chart identifies the chart the objects were rendered from.
	Chart Chart
	// Values are the user-supplied values (stored in the record).
	Values map[string]any
	// Objects are the rendered objects, in apply order. When nil they are
	// parsed from Manifest.
	Objects []*unstructured.Unstructured
	// Manifest is the rendered manifest (stored in the record). When empty
	// it is generated from Objects.
	Manifest string

	// Timeout bounds the rollout: ReplicaSet discovery and the wait
	// (0: DefaultTimeout). It is also the age after which another
	// operation's pending record counts as stale.
	Timeout time.Duration
	// HistoryMax is how many records to keep (0: unlimited).
	HistoryMax int
	// DryRun applies every object with a server-side dry run and records
	// nothing (no lock either).
	DryRun bool
	// CreateNamespace creates the release namespace when missing.
	CreateNamespace bool
	// ForceConflicts takes over fields other field managers own.
	ForceConflicts bool
	// ForceUnlock takes over another operation's pending record.
	ForceUnlock bool
	// RollbackOnFailure lets the Deployer's OnFailure handler run when the
	// rollout fails.
	RollbackOnFailure bool
	// MaxSurge and MaxUnavailable, when set, override the rolling-update
	// strategy of every Deployment (the recorded manifest carries the
	// override).
	MaxSurge       *intstr.IntOrString
	MaxUnavailable *intstr.IntOrString
	// Note, when set, is appended to the revision's description (e.g. what
	// the surge policy changed for this rollout).
	Note string
}

// withNote appends opts.Note to a description.
func (opts DeployOptions) withNote(desc string) string {
	if opts.Note == "" {
		return desc
	}
	return desc + "; " + opts.Note
}

// FailedRollout describes a rollout that failed, for a [FailureHandler].
type FailedRollout struct {
	// Record is the failed revision's record. It is still pending: the
	// handler runs while the lock is held (pass it as LockOptions.Held, or
	// to [Rollbacker.RollbackHeld]); the Deployer marks it failed after the
	// handler returns.
	Record *Release
	// Failure is the diagnosis.
	Failure *Failure
	// Err is the error that ended the rollout.
	Err error
	// Options are the deploy's options.
	Options DeployOptions
}

// FailureHandler runs after a failed rollout while the release's lock is
// still held, typically to roll back to the previous good revision. It
// returns the result of what it did (nil if it did nothing); a result with
// RolledBackTo set and a nil error makes the deploy's exit code 3.
type FailureHandler func(ctx context.Context, f *FailedRollout) (*Result, error)

// Diagnoser explains a failed wait (pod, container, exit code, events,
// logs). It returns nil to keep the Deployer's basic diagnosis.
type Diagnoser func(ctx context.Context, rec *Release, objs []*unstructured.Unstructured, res wait.Result, err error) *Failure

// Deployer installs or upgrades a release: `vllmctl deploy`.
type Deployer struct {
	*Engine
	// Preflight, when set, checks the objects before the lock is taken;
	// an error refuses the deploy with nothing applied or recorded. It may
	// return replacement objects (e.g. with a safer rollout strategy),
	// which are then applied and recorded; nil keeps objs.
	Preflight func(ctx context.Context, objs []*unstructured.Unstructured, opts DeployOptions) ([]*unstructured.Unstructured, error)
	// Diagnose, when set, explains a failed wait.
	Diagnose Diagnoser
	// OnFailure, when set and DeployOptions.RollbackOnFailure is true, runs
	// after a failed rollout while the lock is still held.
	OnFailure FailureHandler
}

// NewDeployer returns a Deployer using engine.
func NewDeployer(engine *Engine) *Deployer { return &Deployer{Engine: engine} }

// Deploy applies the rendered objects as the release's next revision and
// waits for them:
//
//  1. the release name is checked and the objects prepared (strategy
//     override); Preflight runs; with DryRun every object is applied with a
//     server-side dry run and nothing is recorded;
//  2. the lock is taken: the next revision is written pending-install or
//     pending-upgrade, with the chart, the user values and the manifest; a
//     stale or (ForceUnlock) any pending record is taken over;
//  3. the objects are applied (Namespaces first); if the cluster refuses,
//     the revision is marked failed and the error returned (a field-manager
//     conflict is a *FieldConflictError, exit code 6);
//  4. the ReplicaSet of every Deployment is discovered and recorded;
//  5. the objects are waited for, within Timeout;
//  6. on success the revision is marked deployed (the previous one
//     superseded), the objects of the previously live revisions that this
//     one no longer has are pruned, and old records beyond HistoryMax are
//     deleted;
//  7. on failure OnFailure runs (if enabled), the revision is marked failed
//     and a *RolloutError is returned.
//
// The result is returned whenever a revision was written, also with an
// error.
func (d *Deployer) Deploy(ctx context.Context, opts DeployOptions) (*Result, error) {
	if err := d.check("store", "objects", "waiter", "client"); err != nil {
		return nil, err
	}
	clk := d.clock()
	start := stamp(clk)
	if err := ValidateName(opts.Name); err != nil {
		return nil, err
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	objs, manifest, err := prepareObjects(opts)
	if err != nil {
		return nil, err
	}
	if d.Preflight != nil {
		replaced, err := d.Preflight(ctx, objs, opts)
		if err != nil {
			return nil, err
		}
		if replaced != nil {
			objs = replaced
			if manifest, err = charts.Manifest(objs); err != nil {
				return nil, &InvalidManifestError{Name: opts.Name, Err: err}
			}
		}
	}
	if opts.DryRun {
		return d.dryRun(ctx, opts, objs, start)
	}
	if opts.CreateNamespace {
		// The records live in the release namespace: it must exist before
		// the lock can be taken.
		created, err := d.Objects.Apply(ctx, nil, ApplyOptions{Namespace: d.Namespace(), CreateNamespace: true})
		for _, a := range created {
			d.emit(opts.Name, 0, PhaseApply, a.Object.String(), string(a.Action), "")
		}
		if err != nil {
			return nil, fmt.Errorf("release %s: create namespace %s: %w", opts.Name, d.Namespace(), err)
		}
	}

	rec, err := Acquire(ctx, d.Store, opts.Name, OpDeploy, LockOptions{
		Holder:  d.holder(),
		Timeout: opts.Timeout,
		Force:   opts.ForceUnlock,
		Clock:   clk,
		Record:  &Release{Chart: opts.Chart, Values: opts.Values, Manifest: manifest},
	})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("release %s: does namespace %s exist? (--create-namespace creates it): %w", opts.Name, d.Namespace(), err)
	}
	if err != nil {
		return nil, err
	}
	res := newResult(rec)
	d.emit(rec.Name, rec.Revision, PhaseLock, "", string(rec.Status), rec.Description+", held by "+rec.Holder)
	install := rec.Status == StatusPendingInstall

	live, err := liveRevisions(ctx, d.Store, rec.Name, rec.Revision)
	var previous []*unstructured.Unstructured
	if err == nil {
		previous, err = manifestObjects(live)
	}
	if err != nil {
		err = fmt.Errorf("release %s: read the previous revisions: %w", rec.Name, err)
		return d.finishFailed(ctx, rec, res, start, opts.verb(install)+" failed: "+err.Error(),
			&Failure{Reason: "Internal", Message: err.Error()}, err)
	}

	// Apply.
	applied, err := d.Objects.Apply(ctx, objs, ApplyOptions{
		Namespace:       d.Namespace(),
		Release:         rec.Name,
		Force:           opts.ForceConflicts,
		CreateNamespace: opts.CreateNamespace,
	})
	res.Applied = applied
	for _, a := range applied {
		d.emit(rec.Name, rec.Revision, PhaseApply, a.Object.String(), string(a.Action), "")
	}
	if err != nil {
		err = fmt.Errorf("release %s revision %d: %w", rec.Name, rec.Revision, err)
		f := applyFailure(err)
		return d.finishFailed(ctx, rec, res, start, opts.verb(install)+" failed: "+f.Reason, f, err)
	}

	// Discover the ReplicaSets, then wait, within the timeout.
	deadline := start.Add(opts.Timeout)
	remaining := func() time.Duration { return max(deadline.Sub(stamp(clk)), time.Millisecond) }
	rctx, cancel := context.WithTimeout(ctx, remaining())
	err = d.discoverReplicaSets(rctx, rec, objs)
	cancel()
	var werr error
	var wres wait.Result
	var f *Failure
	switch {
	case err != nil:
		if lost := lockLost(err); lost != nil {
			return res, lost
		}
		werr = fmt.Errorf("release %s revision %d: find ReplicaSets: %w", rec.Name, rec.Revision, err)
		f = replicaSetFailure(werr)
	default:
		wres, werr = d.waitObjects(ctx, rec, objs, remaining())
		if lost := lockLost(werr); lost != nil {
			return res, lost
		}
	}

	if werr != nil {
		if ctx.Err() != nil {
			// Interrupted mid-rollout: the new revision never became
			// healthy, so it is rolled back like a failed one when that is
			// enabled (the rescue runs on its own context); otherwise the
			// record is finished as interrupted.
			f := &Failure{Reason: "Interrupted", Message: "the deploy was interrupted before the rollout completed: " + werr.Error()}
			if opts.RollbackOnFailure && d.OnFailure != nil {
				return d.rolloutFailed(ctx, rec, res, start, opts, objs, wres, werr, f, install)
			}
			return d.finishFailed(ctx, rec, res, start, opts.withNote(opts.verb(install)+" interrupted"), f, werr)
		}
		return d.rolloutFailed(ctx, rec, res, start, opts, objs, wres, werr, f, install)
	}

	// Healthy: deployed, then prune, then history.
	desc := "Upgrade complete"
	if install {
		desc = "Install complete"
	}
	desc = opts.withNote(desc)
	if err := MarkDeployed(ctx, d.Store, rec, clk, desc); err != nil {
		res.sync(rec, start, clk)
		return res, fmt.Errorf("mark release %s revision %d deployed: %w", rec.Name, rec.Revision, err)
	}
	d.emit(rec.Name, rec.Revision, PhaseDone, "", string(rec.Status), desc)
	var errs []error
	pruned, err := d.pruneObjects(ctx, rec, previous, objs)
	res.Pruned = pruned
	errs = append(errs, err)
	errs = append(errs, d.pruneHistory(ctx, rec, opts.HistoryMax))
	res.sync(rec, start, clk)
	return res, errors.Join(errs...)
}

// verb is "Install" or "Upgrade", for descriptions.
func (opts DeployOptions) verb(install bool) string {
	if install {
		return "Install"
	}
	return "Upgrade"
}

// lockLost returns err when it says the lock was taken over.
func lockLost(err error) error {
	var conflict *ConflictError
	if errors.As(err, &conflict) {
		return err
	}
	return nil
}

// finishFailed marks rec failed and returns the result with err.
func (d *Deployer) finishFailed(ctx context.Context, rec *Release, res *Result, start time.Time, desc string, f *Failure, err error) (*Result, error) {
	if merr := d.markFailed(ctx, rec, desc, f); merr != nil {
		err = errors.Join(err, merr)
	}
	res.sync(rec, start, d.clock())
	return res, err
}

// rolloutFailed handles a failed ReplicaSet discovery or wait: diagnosis
// (f, when already known), OnFailure while the lock is held, then the
// failed record.
func (d *Deployer) rolloutFailed(ctx context.Context, rec *Release, res *Result, start time.Time, opts DeployOptions,
	objs []*unstructured.Unstructured, wres wait.Result, werr error, f *Failure, install bool) (*Result, error) {
	if f == nil {
		f = waitFailure(wres, werr)
	}
	if d.Diagnose != nil && f.Reason != "Interrupted" {
		if df := d.Diagnose(ctx, rec, objs, wres, werr); df != nil {
			f = df
		}
	}
	rerr := &RolloutError{Namespace: rec.Namespace, Name: rec.Name, Revision: rec.Revision, Op: OpDeploy, Failure: f, Err: werr, Install: install}
	desc := fmt.Sprintf("%s failed: %s", opts.verb(install), f.Reason)
	if f.Object != "" {
		desc += " (" + f.Object + ")"
	}
	desc = opts.withNote(desc)
	if opts.RollbackOnFailure && d.OnFailure != nil {
		d.emit(rec.Name, rec.Revision, PhaseRollback, "", "started", "rollout failed: "+f.Reason)
		rb, err := d.OnFailure(ctx, &FailedRollout{Record: rec, Failure: f, Err: werr, Options: opts})
		res.Rollback = rb
		switch {
		case err != nil:
			rerr.RollbackErr = err
			desc += "; automatic rollback failed"
		case rb != nil && rb.RolledBackTo > 0:
			rerr.RolledBackTo = rb.RolledBackTo
			res.RolledBackTo = rb.RolledBackTo
			desc += fmt.Sprintf("; rolled back to %d", rb.RolledBackTo)
		}
	}
	return d.finishFailed(ctx, rec, res, start, desc, f, rerr)
}

// dryRun applies every object with a server-side dry run; nothing is
// recorded.
func (d *Deployer) dryRun(ctx context.Context, opts DeployOptions, objs []*unstructured.Unstructured, start time.Time) (*Result, error) {
	entries, err := d.Store.List(ctx, opts.Name)
	if err != nil {
		return nil, err
	}
	status := StatusPendingInstall
	for _, e := range entries {
		if e.Status == StatusDeployed {
			status = StatusPendingUpgrade
		}
	}
	res := newResult(&Release{Name: opts.Name, Namespace: d.Namespace(), Revision: nextRevision(entries), Status: status, Chart: opts.Chart})
	res.DryRun = true
	res.Description = "Dry run complete"
	applied, err := d.Objects.Apply(ctx, objs, ApplyOptions{
		Namespace:       d.Namespace(),
		Release:         opts.Name,
		Force:           opts.ForceConflicts,
		CreateNamespace: opts.CreateNamespace,
		DryRun:          true,
	})
	res.Applied = applied
	for _, a := range applied {
		msg := "dry run"
		if a.Unvalidated {
			msg = "dry run, not validated: its namespace does not exist yet"
		}
		d.emit(opts.Name, res.Revision, PhaseApply, a.Object.String(), string(a.Action), msg)
	}
	res.DurationSeconds = stamp(d.clock()).Sub(start).Seconds()
	if err != nil {
		return res, fmt.Errorf("release %s: dry run: %w", opts.Name, err)
	}
	return res, nil
}

// prepareObjects returns the objects to apply (copies, with the strategy
// override) and the manifest to record.
func prepareObjects(opts DeployOptions) ([]*unstructured.Unstructured, string, error) {
	objs := opts.Objects
	manifest := opts.Manifest
	if objs == nil {
		parsed, err := ParseManifest(manifest)
		if err != nil {
			return nil, "", &InvalidManifestError{Name: opts.Name, Err: err}
		}
		objs = parsed
	}
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = o.DeepCopy()
	}
	override := opts.MaxSurge != nil || opts.MaxUnavailable != nil
	if override {
		for _, o := range out {
			if isDeployment(RefOf(o)) {
				if err := overrideStrategy(o, opts.MaxSurge, opts.MaxUnavailable); err != nil {
					return nil, "", &InvalidManifestError{Name: opts.Name, Err: err}
				}
			}
		}
	}
	if override || manifest == "" {
		m, err := charts.Manifest(out)
		if err != nil {
			return nil, "", &InvalidManifestError{Name: opts.Name, Err: err}
		}
		manifest = m
	}
	return out, manifest, nil
}

// overrideStrategy sets a Deployment's rolling-update maxSurge and/or
// maxUnavailable (and its strategy type to RollingUpdate).
func overrideStrategy(obj *unstructured.Unstructured, surge, unavailable *intstr.IntOrString) error {
	set := func(v *intstr.IntOrString, field string) error {
		if v == nil {
			return nil
		}
		var val any = v.String()
		if v.Type == intstr.Int {
			val = int64(v.IntValue())
		}
		return unstructured.SetNestedField(obj.Object, val, "spec", "strategy", "rollingUpdate", field)
	}
	if err := unstructured.SetNestedField(obj.Object, "RollingUpdate", "spec", "strategy", "type"); err != nil {
		return fmt.Errorf("%s: set strategy: %w", RefOf(obj), err)
	}
	if err := set(surge, "maxSurge"); err != nil {
		return fmt.Errorf("%s: set maxSurge: %w", RefOf(obj), err)
	}
	if err := set(unavailable, "maxUnavailable"); err != nil {
		return fmt.Errorf("%s: set maxUnavailable: %w", RefOf(obj), err)
	}
	return nil
}

// InvalidManifestError reports a manifest that cannot be parsed or
// prepared (exit code 2).
type InvalidManifestError struct {
	Name string
	Err  error
}

func (e *InvalidManifestError) Error() string {
	return fmt.Sprintf("release %s: invalid manifest: %v", e.Name, e.Err)
}

// Unwrap returns the parse error.
func (e *InvalidManifestError) Unwrap() error { return e.Err }

// ExitCode is 2: invalid input.
func (e *InvalidManifestError) ExitCode() int { return exitInvalid }
