package release

import (
	"context"
	"errors"
	"fmt"
	"time"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/release/analysis"
	"github.com/vllmctl/vllmctl/release/canary"
	"github.com/vllmctl/vllmctl/release/preflight"
	"github.com/vllmctl/vllmctl/release/preflight/modelfit"
	"github.com/vllmctl/vllmctl/release/storage"
)

// DeployOptions are the inputs of one deploy.
type DeployOptions struct {
	// Name is the release name.
	Name string
	// Render is the chart the deploy renders and its render options: the
	// Engine.Deploy renders it for the revision it writes (.Release.Revision and
	// .Release.IsUpgrade taken under the lock, .Capabilities.KubeVersion
	// the server's); the record's chart, values and manifest and the
	// chart's crds/ come from the render.
	Render RenderInput
	// SkipCRDs leaves the chart's crds/ alone (--skip-crds): no CRD is
	// read or created.
	SkipCRDs bool

	// Timeout bounds the rollout: ReplicaSet discovery and the wait. It is
	// also the age after which another operation's pending record counts
	// as stale. 0 (no --timeout given): it follows the rendered objects'
	// start-up budget (StartupTimeout: DefaultTimeout at least), and no
	// warning says it is too short.
	Timeout time.Duration
	// timeoutFollowsStartup is set by Deploy when Timeout was 0: the
	// rendered objects settle it (warnStartup).
	timeoutFollowsStartup bool
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
	// RollbackOnFailure restores the newest good revision when the rollout
	// fails (or is interrupted), while the failed revision still holds the
	// lock, on a budget of its own (RollbackTimeout).
	RollbackOnFailure bool
	// RollbackTimeout is the automatic rollback's own time budget
	// (0: DefaultRollbackTimeout).
	RollbackTimeout time.Duration
	// MaxSurge and MaxUnavailable, when set, override the rolling-update
	// strategy of every Deployment (the recorded manifest carries the
	// override).
	MaxSurge       *intstr.IntOrString
	MaxUnavailable *intstr.IntOrString
	// TakeOwnership adopts existing objects the release would write that
	// are not its own (another release's, or made by other means); without
	// it the deploy refuses them (*OwnershipError).
	TakeOwnership bool
	// SkipPreflight skips the capacity and model-fit preflights.
	SkipPreflight bool
	// ModelFit is where the model-fit preflight reads the models'
	// config.json (--model-config, HF_ENDPOINT, HF_TOKEN); the zero value
	// runs no model-fit check.
	ModelFit modelfit.Source
	// SurgePolicy is what the preflight does when the rollout's surge
	// cannot fit ("": auto).
	SurgePolicy preflight.SurgePolicy
	// Diff emits what the deploy changes (a PhaseDiff event carrying the
	// report) before anything is applied.
	Diff bool
	// Canary, when set, rolls the new revision out through a canary phase
	// (see canary.Options); the record keeps the chart's strategy.
	Canary *canary.Options
	// Analysis, when set, measures the canary pods against the stable
	// pods during the canary hold (deploy --analysis FILE); without it
	// the built-in chart's analysis values are read, when enabled.
	Analysis *analysis.Config
	// Prometheus is where the prometheus provider of an analysis queries
	// (--prometheus-url …); an analysis with provider prometheus needs it.
	Prometheus *analysis.PrometheusEndpoint
	// Note, when set, is appended to the revision's description (e.g. what
	// the surge policy changed for this rollout).
	Note string
}

// RenderInput is a chart and the render options of a deploy. Revision,
// IsUpgrade and KubeVersion are set by Engine.Deploy.
type RenderInput struct {
	Chart   *chart.Chart
	Options charts.RenderOptions
	// Source and Digest say where a pulled chart came from (its .tgz's URL
	// and sha256); the record keeps them (storage.Chart).
	Source, Digest string
	// Signer and SignedDigest are the chart's verified provenance (--verify):
	// the signing key's identities and the sha256 of the signed .tgz; the
	// record keeps them (storage.Chart).
	Signer, SignedDigest string
	// Builtin is set when Chart is a built-in chart (the record says so:
	// the serve check is on by default for it).
	Builtin bool
}

// DefaultRollbackTimeout is the automatic rollback's own time budget: it
// does not share what is left of --timeout.
const DefaultRollbackTimeout = 5 * time.Minute

// withNote appends opts.Note to a description.
func (opts DeployOptions) withNote(desc string) string {
	if opts.Note == "" {
		return desc
	}
	return desc + "; " + opts.Note
}

// verb is "Install" or "Upgrade", for descriptions.
func (opts DeployOptions) verb(install bool) string {
	if install {
		return "Install"
	}
	return "Upgrade"
}

// reconciles reports whether a deploy that would change nothing records
// nothing ("up to date").
func (opts DeployOptions) reconciles() bool { return !opts.DryRun && !opts.ForceUnlock }

// Deploy deploys the release's next revision and waits for it:
//
//  1. the records are read and the chart rendered for the revision they
//     imply; every problem with the input is an error with exit code 2,
//     before anything is applied or recorded;
//  2. with DryRun the capacity preflight runs, every object is applied
//     with a server-side dry run and nothing is recorded;
//  3. a server-side dry run computes what the deploy changes (a PhaseDiff
//     event with Diff);
//  4. the capacity preflight checks the rollout against the free capacity
//     and quotas, from the live Deployments and dry-run outcomes step 3
//     read, and may steer the strategy (SurgePolicy), after which step 3
//     is redone; a refusal is exit code 2;
//  5. the lock is taken: the next revision is written pending-install or
//     pending-upgrade; a stale or (ForceUnlock) any pending record is taken
//     over. When nothing would change and the deployed revision is healthy,
//     the deploy reports "up to date" instead, with no lock and no record,
//     provided the records did not change meanwhile (read again). Under the
//     lock the records are read again: when another operation wrote one
//     meanwhile, the chart is rendered again for the revision the lock
//     holds and the diff computed again; if nothing would change then, the
//     pending record is removed and the deploy reports "up to date";
//  6. the objects are applied, the ReplicaSets recorded, the rollout
//     watched within Timeout;
//  7. on success the revision is marked deployed, what the previous
//     revisions had and this one has not is pruned, old records beyond
//     HistoryMax are deleted; on failure (or an interrupt) the newest good
//     revision is restored when RollbackOnFailure is set, the revision is
//     marked failed and a *RolloutError is returned.
//
// The result is returned whenever a revision was written, also with an
// error.
func (e *Engine) Deploy(ctx context.Context, opts DeployOptions) (*Result, error) {
	if err := e.check(needStore, needObjects, needWaiter, needClient); err != nil {
		return nil, err
	}
	start := storage.Stamp(e.clock())
	if err := settleOptions(ctx, &opts); err != nil {
		return nil, err
	}
	p, entries, err := e.planDeploy(ctx, opts)
	if err != nil {
		return nil, err
	}
	if opts.DryRun {
		return p.withNotes(e.deployDryRun(ctx, p, entries, start))
	}
	if err := e.settleChanges(ctx, p, entries); err != nil {
		return nil, err
	}
	e.warnStartup(p)
	e.emitDiff(p)
	if res, err := e.upToDate(ctx, p, entries, start); res != nil || err != nil {
		return p.withNotes(res, err)
	}
	if err := e.createNamespace(ctx, opts); err != nil {
		return nil, err
	}
	rec, err := e.lock(ctx, p)
	if err != nil {
		return nil, err
	}
	res := newResult(rec)
	switch done, err := e.recheck(ctx, p, rec, entries, res, start); {
	case err != nil:
		return nil, err
	case done:
		return p.withNotes(res, nil)
	}
	return p.withNotes(p.withPreflight(e.rollout(ctx, p, rec, res, start)))
}

// withNotes puts the chart's rendered NOTES.txt into the result of a
// deploy that succeeded.
func (p *deployPlan) withNotes(res *Result, err error) (*Result, error) {
	if err == nil && res != nil {
		res.Notes = p.notes
	}
	return res, err
}

// settleOptions checks the release name, fills in the default timeouts
// and checks the canary (on a copy of it) and render options.
func settleOptions(ctx context.Context, opts *DeployOptions) error {
	if err := storage.ValidateName(opts.Name); err != nil {
		return err
	}
	if opts.Timeout <= 0 {
		// Until the objects are rendered; warnStartup settles it.
		opts.Timeout, opts.timeoutFollowsStartup = DefaultTimeout, true
	}
	if opts.RollbackTimeout <= 0 {
		opts.RollbackTimeout = DefaultRollbackTimeout
	}
	if c := opts.Canary; c != nil {
		cc := *c
		if err := cc.Validate(opts.MaxSurge != nil || opts.MaxUnavailable != nil, opts.DryRun); err != nil {
			return err
		}
		opts.Canary = &cc
	}
	return validateRender(ctx, opts.Name, &opts.Render)
}

// planDeploy reads the release's records and renders the chart for the
// revision they imply; it returns the plan and the records it was made
// from.
func (e *Engine) planDeploy(ctx context.Context, opts DeployOptions) (*deployPlan, []storage.Entry, error) {
	entries, err := e.Store.List(ctx, opts.Name)
	if err != nil {
		return nil, nil, fmt.Errorf("release %s: read its records: %w", opts.Name, err)
	}
	if err := storage.CheckReadable(entries); err != nil {
		return nil, nil, err
	}
	if err := storage.CheckNotHandedOver(entries, e.Namespace(), opts.Name); err != nil {
		return nil, nil, err
	}
	p, err := e.prepare(ctx, opts, storage.PlanOf(entries), entries)
	if err != nil {
		return nil, nil, err
	}
	if err := p.readDeployed(entries); err != nil {
		return nil, nil, err
	}
	// A strategy the API server would refuse is the preflight's refusal,
	// named as the preflight names it, before any dry run.
	if err := preflight.CheckStrategies(p.objs, e.Namespace()); err != nil {
		return nil, nil, err
	}
	return p, entries, nil
}

// deployDryRun is a deploy with DryRun: the changes (with Diff), the
// capacity preflight and a server-side dry run of every object; nothing is
// recorded.
func (e *Engine) deployDryRun(ctx context.Context, p *deployPlan, entries []storage.Entry, start time.Time) (*Result, error) {
	if p.opts.Diff {
		// --dry-run --diff: what the deploy would change, from the
		// same server-side dry run a deploy computes it with.
		if err := e.changes(ctx, p, entries); err != nil {
			return nil, err
		}
	}
	if err := e.preflight(ctx, p); err != nil {
		return nil, err
	}
	e.warnStartup(p)
	e.emitDiff(p)
	return p.withPreflight(e.dryRun(ctx, p, start))
}

// settleChanges computes what the deploy changes and runs the capacity
// preflight. The dry run of the changes comes first: the preflight takes
// the live Deployments and their dry-run outcome from it. A strategy the
// preflight then steers changes the objects: their dry run is redone.
func (e *Engine) settleChanges(ctx context.Context, p *deployPlan, entries []storage.Entry) error {
	if err := e.changes(ctx, p, entries); err != nil {
		return err
	}
	switch adjusted, err := e.preflightAdjusts(ctx, p); {
	case err != nil:
		return err
	case adjusted:
		return e.changes(ctx, p, entries)
	}
	return nil
}

// withPreflight adds the preflights' reports to a deploy's result: the
// capacity preflight's, and the model-fit check's when it found a vLLM
// server.
func (p *deployPlan) withPreflight(res *Result, err error) (*Result, error) {
	if res != nil && p.preflight != nil {
		res.Preflight = p.preflight
	}
	if res != nil && p.modelFit != nil && len(p.modelFit.Servers) > 0 {
		res.ModelFit = p.modelFit
	}
	return res, err
}

// DryRunError reports a deploy whose server-side dry run the cluster
// refused: nothing was applied and no record written. An object the
// server finds invalid is exit code 2; any other refusal keeps its own
// (6: the cluster refused).
type DryRunError struct {
	Name string
	Err  error
}

func (e *DryRunError) Error() string {
	if errors.Is(e.Err, context.Canceled) {
		return fmt.Sprintf("release %s: interrupted during the server-side dry run, nothing was applied: %v", e.Name, e.Err)
	}
	return fmt.Sprintf("release %s: the server-side dry run refused the deploy, nothing was applied: %v", e.Name, e.Err)
}

// Unwrap returns the dry run's error.
func (e *DryRunError) Unwrap() error { return e.Err }

// ExitCode is 2 for an invalid object, else the dry run error's.
func (e *DryRunError) ExitCode() int {
	var re *diff.RedactedError
	if apierrors.IsInvalid(e.Err) || (errors.As(e.Err, &re) && (re.Reason == string(metav1.StatusReasonInvalid) || re.Code == 422)) {
		return exitcode.Invalid
	}
	return exitcode.Of(e.Err)
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
func (e *InvalidManifestError) ExitCode() int { return exitcode.Invalid }
