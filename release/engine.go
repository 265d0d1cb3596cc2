package release

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"helm.sh/helm/v4/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/preflight"
	"github.com/vllmctl/vllmctl/release/preflight/modelfit"
	"github.com/vllmctl/vllmctl/release/servecheck"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// DefaultTimeout bounds an operation (its ReplicaSet discovery and its
// wait) when its options give none: deploy's --timeout default.
const DefaultTimeout = 10 * time.Minute

// ObjectClient is what the release operations need from the cluster's
// objects. [*Applier] implements it; tests use fakes.
type ObjectClient interface {
	// Apply applies objs with server-side apply; see [Applier.Apply].
	Apply(ctx context.Context, objs []*unstructured.Unstructured, opts cluster.ApplyOptions) ([]cluster.ApplyResult, error)
	// Prune deletes the objects of previous that current no longer has;
	// see [Applier.Prune].
	Prune(ctx context.Context, previous, current []*unstructured.Unstructured, opts cluster.PruneOptions) ([]cluster.PruneResult, error)
	// Delete deletes obj while it is the release's and waits until it is
	// gone; see [Applier.Delete].
	Delete(ctx context.Context, obj *unstructured.Unstructured, opts cluster.PruneOptions) (cluster.PruneResult, error)
	// Get reads the live copy of obj; see [Applier.Get].
	Get(ctx context.Context, obj *unstructured.Unstructured, namespace string) (*unstructured.Unstructured, error)
}

var _ ObjectClient = (*cluster.Applier)(nil)

// Engine holds what every release operation shares, as Helm's
// action.Configuration does: the record store of the release namespace, the
// cluster clients, the clock and the progress sink. The operations are its
// methods ([Engine.Deploy], [Engine.Rollback], [Engine.Wait], ...); each
// checks the fields it needs (check) before it reads or writes anything.
type Engine struct {
	// Store keeps the release records; its namespace is the release
	// namespace.
	Store storage.Store
	// Objects applies, prunes and reads the release's objects.
	Objects ObjectClient
	// Waiter waits for applied objects to become Current.
	Waiter wait.Waiter
	// Client reads Deployments and ReplicaSets (ReplicaSet discovery).
	Client kubernetes.Interface
	// PodClient, when set, is a podwire.Requests client (of Client's
	// cluster) the capacity preflight lists pods through: it decodes only
	// what the preflight reads of them.
	PodClient rest.Interface
	// Clock stamps records and measures durations (default: wall clock).
	Clock clock.WithTicker
	// Holder names this process in pending records (default:
	// DefaultHolder()).
	Holder string
	// Progress, when set, receives one event per change. It is never
	// called concurrently.
	Progress func(ProgressEvent)
	// Heartbeat is how often a waiting operation rewrites its pending
	// record (0 or less: a third of the lease).
	Heartbeat time.Duration
	// Redactor, when set, learns the values of every Secret an operation
	// renders or reads from a record, so that whoever prints the
	// operation's progress, errors and result can withhold them.
	Redactor *diff.Redactor
	// Lease is how long this engine's pending records may go unrenewed
	// before another operation takes their lock over (0: DefaultLease, at
	// least three heartbeats).
	Lease time.Duration
	// ControllerStallTimeout bounds how long the discovery of a revision's
	// ReplicaSets and ControllerRevisions waits for a controller that does
	// not observe an object's generation (the API server answering) before
	// the rollout fails with verdict ControllerStalled (0:
	// wait.DefaultControllerStallTimeout); the Waiter has its own
	// (wait.RolloutOptions.ControllerStallTimeout).
	ControllerStallTimeout time.Duration
	// Lookup, when set, answers the lookup function of the charts the
	// engine renders (cluster.Applier.Lookup), read-only; nil renders
	// lookups as `helm template` does (an empty map).
	Lookup func(ctx context.Context, served []string) engine.ClientProvider
	// PodHTTP, when set, returns an HTTP client whose requests reach a
	// pod's port through the API server's port-forward (podhttp), and the
	// function that closes its idle connections: the canary analysis
	// scrapes and loads pods through it.
	PodHTTP func(namespace, pod string, port int, timeout time.Duration) (*http.Client, func())
	// ServeCheck are the serve check's flags for every operation of the
	// engine (deploy, its automatic rollback, rollback, wait, test); the
	// check reaches pods through PodHTTP (nil: no serve check).
	ServeCheck servecheck.Options

	// discovered is the cluster's discovery as the engine's first render
	// read it (RenderCluster): read once per engine.
	discovered *cluster.Discovered
}

// Namespace is the release namespace: the store's.
func (e *Engine) Namespace() string { return e.Store.Namespace() }

func (e *Engine) clock() clock.WithTicker {
	if e.Clock == nil {
		return clock.RealClock{}
	}
	return e.Clock
}

func (e *Engine) holder() string {
	if e.Holder != "" {
		return e.Holder
	}
	return storage.DefaultHolder()
}

// dependency is one of the Engine's fields an operation cannot run without.
type dependency int

const (
	needStore dependency = iota
	needObjects
	needWaiter
	needClient
)

// check reports a missing dependency instead of a nil dereference later.
func (e *Engine) check(needs ...dependency) error {
	if e == nil {
		return errors.New("release engine: not configured")
	}
	for _, n := range needs {
		var missing bool
		var name string
		switch n {
		case needStore:
			missing, name = e.Store == nil, "record store (Store)"
		case needObjects:
			missing, name = e.Objects == nil, "object client (Objects)"
		case needWaiter:
			missing, name = e.Waiter == nil, "rollout waiter (Waiter)"
		case needClient:
			missing, name = e.Client == nil, "Kubernetes client (Client)"
		}
		if missing {
			return fmt.Errorf("release engine: no %s configured", name)
		}
	}
	return nil
}

// emit sends a progress event, stamped now.
func (e *Engine) emit(name string, revision int, phase Phase, object, status, message string) {
	e.emitEvent(ProgressEvent{Release: name, Revision: revision, Phase: phase, Object: object, Status: status, Message: message})
}

// emitEvent sends ev, stamped now.
func (e *Engine) emitEvent(ev ProgressEvent) {
	if e.Progress == nil {
		return
	}
	ev.Time = storage.Stamp(e.clock())
	e.Progress(ev)
}

// ChartInfo is how a result, a status report and a history row show a
// revision's chart (storage.Chart): name-version and appVersion, where a
// pulled chart came from, and its verified provenance.
type ChartInfo struct {
	// Chart is name-version, as history shows it.
	Chart      string `json:"chart"`
	AppVersion string `json:"appVersion"`
	// ChartSource and ChartDigest are where a pulled chart came from.
	ChartSource string `json:"chartSource,omitempty"`
	ChartDigest string `json:"chartDigest,omitempty"`
	// ChartSigner and ChartSignedDigest are the chart's verified
	// provenance (--verify).
	ChartSigner       string `json:"chartSigner,omitempty"`
	ChartSignedDigest string `json:"chartSignedDigest,omitempty"`
}

// NewChartInfo is what the outputs show of chart c.
func NewChartInfo(c storage.Chart) ChartInfo {
	return ChartInfo{Chart: c.String(), AppVersion: c.AppVersion, ChartSource: c.Source, ChartDigest: c.Digest,
		ChartSigner: c.Signer, ChartSignedDigest: c.SignedDigest}
}

// Result is the outcome of a deploy or a rollback: the document the
// contract specifies for -o json|yaml (release, namespace, revision, status,
// chart, appVersion, replicaSets, rolledBackTo, failure, durationSeconds),
// plus a few informative fields.
type Result struct {
	Release   string `json:"release"`
	Namespace string `json:"namespace"`
	// Revision is the revision the operation wrote (for a dry run: the one
	// it would write).
	Revision int            `json:"revision"`
	Status   storage.Status `json:"status"`
	ChartInfo
	// ReplicaSets are the ReplicaSets the revision's Deployments rolled out.
	ReplicaSets []storage.ReplicaSetRef `json:"replicaSets"`
	// ControllerRevisions are the ControllerRevisions the revision's
	// StatefulSets rolled out (grouped releases).
	ControllerRevisions []storage.ControllerRevisionRef `json:"controllerRevisions,omitempty"`
	// RolledBackTo is the revision whose manifest was restored: the target
	// of a rollback, or of the automatic rollback after a failed deploy.
	RolledBackTo int `json:"rolledBackTo,omitempty"`
	// Failure is the diagnosis of a failed rollout.
	Failure         *rollout.Diagnosis `json:"failure,omitempty"`
	DurationSeconds float64            `json:"durationSeconds"`

	// Description is the revision's record description.
	Description string `json:"description,omitempty"`
	// UpToDate is set when the deploy changed nothing: the revision
	// shown is the one already deployed (Description starts "up to
	// date: "). Not in the result document, which says so in
	// description.
	UpToDate bool `json:"-"`
	// DryRun is set for a server-side dry run: nothing was recorded.
	DryRun bool `json:"dryRun,omitempty"`
	// Pruned are the objects deleted because the revision no longer has
	// them.
	Pruned []object.Ref `json:"pruned,omitempty"`
	// CRDs are the CustomResourceDefinitions (crds/ of the chart) the
	// revision created.
	CRDs []string `json:"crds,omitempty"`
	// Hooks are the hooks the operation ran (helm.sh/hook), in order.
	Hooks []HookRun `json:"hooks,omitempty"`
	// Applied are the per-object results of the apply.
	Applied []cluster.ApplyResult `json:"-"`
	// Rollback is the result of the automatic rollback, if one ran.
	Rollback *Result `json:"-"`
	// Preflight is the capacity preflight's report, when one ran.
	Preflight *preflight.Report `json:"preflight,omitempty"`
	// ModelFit is the model-fit preflight's report, when it ran and the
	// release serves a vLLM model: per server container, the verdict and
	// its numbers, or why it was skipped.
	ModelFit *modelfit.Report `json:"modelFit,omitempty"`
	// Canary is what the canary phase did (deploy --canary).
	Canary *storage.CanaryReport `json:"canary,omitempty"`
	// Analysis is what the canary analysis measured and concluded.
	Analysis *storage.AnalysisReport `json:"analysis,omitempty"`
	// ServeCheck is the revision's serve check, when one ran.
	ServeCheck *rollout.ServeReport `json:"serveCheck,omitempty"`
	// Notes is the chart's rendered NOTES.txt after a successful deploy
	// (a dry run and "up to date" included), as Helm prints it.
	Notes string `json:"notes,omitempty"`
}

// newResult starts the result of an operation on record r.
func newResult(r *storage.Release) *Result {
	return &Result{
		Release:     r.Name,
		Namespace:   r.Namespace,
		Revision:    r.Revision,
		Status:      r.Status,
		ChartInfo:   NewChartInfo(r.Chart),
		ReplicaSets: []storage.ReplicaSetRef{},
		Description: r.Description,
	}
}

// sync copies the record's state into the result.
func (res *Result) sync(r *storage.Release, start time.Time, clk clock.PassiveClock) {
	res.Revision = r.Revision
	res.Status = r.Status
	res.Description = r.Description
	res.Failure = r.Failure
	res.Analysis = r.Analysis
	if r.ServeCheck != nil {
		res.ServeCheck = r.ServeCheck
	}
	if len(r.ReplicaSets) > 0 {
		res.ReplicaSets = slices.Clone(r.ReplicaSets)
	}
	if len(r.ControllerRevisions) > 0 {
		res.ControllerRevisions = slices.Clone(r.ControllerRevisions)
	}
	res.DurationSeconds = storage.Stamp(clk).Sub(start).Seconds()
}

// RolloutError reports a rollout that failed: the wait ended with objects
// not Current, the ReplicaSets could not be found, or a rollback could not
// restore its target. ExitCode is 3 when an automatic rollback restored the
// previous good revision, 4 otherwise.
type RolloutError struct {
	Namespace string
	Name      string
	Revision  int
	// Op is what failed: "deploy" or "rollback".
	Op      storage.Operation
	Failure *rollout.Diagnosis
	// Err is the underlying error (often a *wait.NotReadyError).
	Err error
	// RolledBackTo is the revision an automatic rollback restored (0:
	// none).
	RolledBackTo int
	// RollbackErr is why the automatic rollback failed, if it ran.
	RollbackErr error
	// Install is set when the failed revision was an install: no earlier
	// revision serves, and its objects stay in place until uninstalled.
	Install bool
}

func (e *RolloutError) Error() string {
	var b strings.Builder
	what := "rollout"
	if e.Op == storage.OpRollback {
		what = "rollback"
	}
	fmt.Fprintf(&b, "release %s revision %d: %s failed", e.Name, e.Revision, what)
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	} else if e.Failure != nil {
		fmt.Fprintf(&b, ": %s", e.Failure.Reason)
		if e.Failure.Message != "" {
			fmt.Fprintf(&b, ": %s", e.Failure.Message)
		}
	}
	switch {
	case e.RollbackErr != nil:
		fmt.Fprintf(&b, "; automatic rollback failed: %v", e.RollbackErr)
	case e.RolledBackTo > 0:
		fmt.Fprintf(&b, "; rolled back to revision %d", e.RolledBackTo)
	}
	if e.Install && e.RolledBackTo == 0 {
		fmt.Fprintf(&b, "; no earlier revision serves: the objects of revision %d are left in place for inspection, "+
			"remove them with `vllmctl uninstall %s -n %s`", e.Revision, e.Name, e.Namespace)
	}
	return b.String()
}

// Unwrap returns the underlying errors.
func (e *RolloutError) Unwrap() []error {
	var errs []error
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	if e.RollbackErr != nil {
		errs = append(errs, e.RollbackErr)
	}
	return errs
}

// ExitCode is 3 when the previous good revision was restored
// automatically, 4 otherwise.
func (e *RolloutError) ExitCode() int {
	if e.RolledBackTo > 0 && e.RollbackErr == nil {
		return 3
	}
	return 4
}

// liveEntries returns the entries (oldest first) whose objects may be live
// in the cluster, leaving out revision own (an operation's own record; 0:
// none): the deployed revision and every revision after it (failed or
// interrupted ones applied their objects too), or, when none is deployed,
// every revision after the last uninstalled one. Uninstalled revisions are
// never included.
func liveEntries(entries []storage.Entry, own int) []storage.Entry {
	start := -1
	for i, e := range entries {
		if e.Status == storage.StatusDeployed {
			start = i
		}
	}
	if start < 0 {
		start = 0
		for i, e := range entries {
			if e.Status == storage.StatusUninstalled || e.Status == storage.StatusHandedOver {
				start = i + 1
			}
		}
	}
	var out []storage.Entry
	for _, e := range entries[start:] {
		if e.Revision != own && e.Status != storage.StatusUninstalled && e.Status != storage.StatusHandedOver {
			out = append(out, e)
		}
	}
	return out
}

// liveRevisions decodes the live entries (see liveEntries) of release name.
// An unreadable record is skipped with a progress note (its objects cannot
// be pruned): the operations that must not go on with one refuse before
// they take the lock.
func (e *Engine) liveRevisions(ctx context.Context, name string, own int) ([]*storage.Release, error) {
	return e.liveRevisionsAmong(ctx, nil, name, own)
}

// liveRevisionsAmong is liveRevisions over known records (nil: listed).
func (e *Engine) liveRevisionsAmong(ctx context.Context, known []storage.Entry, name string, own int) ([]*storage.Release, error) {
	entries := known
	if entries == nil {
		var err error
		if entries, err = e.Store.List(ctx, name); err != nil {
			return nil, err
		}
	}
	var out []*storage.Release
	for _, en := range liveEntries(entries, own) {
		r, err := en.Release()
		var unreadable *storage.UnreadableError
		switch {
		case errors.As(err, &unreadable):
			e.emit(name, own, PhasePrune, "", "skipped", err.Error()+": the objects only it had are not pruned")
			continue
		case err != nil:
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// PreviousObjects returns the objects of the revisions among entries whose
// objects may be live: what the next deploy would consider for pruning, and
// what a diff shows as to be pruned.
func PreviousObjects(entries []storage.Entry) ([]*unstructured.Unstructured, error) {
	revs, err := storage.DecodeAll(liveEntries(entries, 0))
	if err != nil {
		return nil, err
	}
	return manifestObjects(revs)
}

// manifestObjects parses the manifests of revs and concatenates their
// objects, in order.
func manifestObjects(revs []*storage.Release) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, r := range revs {
		o, err := cluster.ParseManifest(r.Manifest)
		if err != nil {
			return nil, fmt.Errorf("release %s revision %d: %w", r.Name, r.Revision, err)
		}
		objs = append(objs, o...)
	}
	return objs, nil
}

// objectName names obj in a failure: "Kind/name".
func objectName(kind, name string) string { return kind + "/" + name }

// heartbeat rewrites a pending record every interval while an operation
// waits, so that other operations never see the lock as stale. Losing the
// record to a takeover (a *ConflictError) cancels the operation with that
// error as the cause.
type heartbeat struct {
	stopCh chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	err    error
}

// lockTerms sets the lease and renewal terms of this engine's pending
// records on opts.
func (e *Engine) lockTerms(opts storage.LockOptions) storage.LockOptions {
	opts.Renew = e.heartbeat()
	if opts.Renew <= 0 {
		opts.Renew = storage.DefaultHeartbeat
	}
	opts.Lease = e.Lease
	return opts
}

// heartbeat is how often this engine rewrites its pending records:
// Heartbeat, else a third of the lease.
func (e *Engine) heartbeat() time.Duration {
	if e.Heartbeat > 0 {
		return e.Heartbeat
	}
	lease := e.Lease
	if lease <= 0 {
		lease = storage.DefaultLease
	}
	return lease / 3
}

// startHeartbeat starts rewriting rec; the caller must not touch rec until
// stop returns. cancel is called, with the *ConflictError, when the lock is
// lost.
func (e *Engine) startHeartbeat(ctx context.Context, rec *storage.Release, cancel context.CancelCauseFunc) *heartbeat {
	hb := &heartbeat{stopCh: make(chan struct{}), done: make(chan struct{})}
	// The engine's clock ticks: a test's fake clock beats only when the
	// test moves it.
	t := e.clock().NewTicker(e.heartbeat())
	go func() {
		defer close(hb.done)
		defer t.Stop()
		for {
			select {
			case <-hb.stopCh:
				return
			case <-ctx.Done():
				return
			case <-t.C():
			}
			rec.Updated = storage.Stamp(e.clock())
			err := e.Store.Update(ctx, rec)
			var conflict *storage.ConflictError
			var nf *storage.NotFoundError
			if errors.As(err, &conflict) || errors.As(err, &nf) {
				hb.mu.Lock()
				hb.err = &storage.ConflictError{Namespace: rec.Namespace, Name: rec.Name, Revision: rec.Revision, Err: err}
				hb.mu.Unlock()
				cancel(hb.err)
				return
			}
			// Other errors are transient: the next beat tries again.
		}
	}()
	return hb
}

// stop ends the heartbeat and returns the lock-loss error, if any.
func (hb *heartbeat) stop() error {
	if hb == nil {
		return nil
	}
	select {
	case <-hb.stopCh:
	default:
		close(hb.stopCh)
	}
	<-hb.done
	hb.mu.Lock()
	defer hb.mu.Unlock()
	return hb.err
}

// waitObjects waits for objs with the engine's Waiter, forwarding its
// events as progress, for at most timeout, while a heartbeat keeps rec's
// lock fresh. A lost lock is returned as a *ConflictError.
func (e *Engine) waitObjects(ctx context.Context, rec *storage.Release, objs []*unstructured.Unstructured, timeout time.Duration) (wait.Result, error) {
	return e.waitWith(ctx, rec, objs, wait.Options{Timeout: timeout})
}

// waitWith is waitObjects with the wait's options (a canary phase's goal).
func (e *Engine) waitWith(ctx context.Context, rec *storage.Release, objs []*unstructured.Unstructured, wopts wait.Options) (wait.Result, error) {
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var hb *heartbeat
	if rec.Status.IsPending() {
		// Only a held lock is kept fresh (`vllmctl test` holds none).
		hb = e.startHeartbeat(wctx, rec, cancel)
	}

	events := make(chan rollout.Event)
	forwarded := make(chan struct{})
	go func() {
		defer close(forwarded)
		for ev := range events {
			if e.Progress != nil {
				e.Progress(ProgressEvent{Time: ev.Time.UTC(), Release: rec.Name, Revision: rec.Revision, Phase: PhaseWait,
					Object: ev.Object.String(), Status: string(ev.Status), Message: ev.Message, Rollout: ev.Rollout, Wait: &ev})
			}
		}
	}()
	wopts.Namespace, wopts.Events = e.Namespace(), events
	if wopts.Values == nil {
		// The failure hints name the values paths of the revision's chart.
		wopts.Values = ChartValuesMap(rec.Chart)
	}
	res, err := e.Waiter.Wait(wctx, objs, wopts)
	<-forwarded
	if lost := hb.stop(); lost != nil {
		return res, lost
	}
	return res, err
}

// waitFailure turns a failed wait into a failure diagnosis: the
// Waiter's own diagnosis when it gives one, else the first object that was
// not Current.
func waitFailure(res wait.Result, err error) *rollout.Diagnosis {
	if d := res.Diagnosis; d != nil {
		f := *d
		if f.Reason == "" {
			f.Reason = string(f.Verdict)
		}
		return &f
	}
	f := &rollout.Diagnosis{Reason: "WaitFailed", Message: err.Error()}
	var nre *wait.NotReadyError
	if errors.As(err, &nre) {
		switch nre.Outcome {
		case wait.OutcomeTimeout:
			f.Reason = "Timeout"
		default:
			f.Reason = "Failed"
		}
		if len(nre.Objects) > 0 {
			first := nre.Objects[0]
			f.Object = objectName(first.Object.Kind, first.Object.Name)
			f.Message = string(first.Status)
			if first.Message != "" {
				f.Message += ": " + first.Message
			}
		}
		return f
	}
	if nc := res.NotCurrent(); len(nc) > 0 {
		f.Object = objectName(nc[0].Object.Kind, nc[0].Object.Name)
	}
	return f
}

// markFailed finishes rec as failed, even when ctx has ended.
func (e *Engine) markFailed(ctx context.Context, rec *storage.Release, description string, f *rollout.Diagnosis) error {
	fctx, cancel := storage.FinishContext(ctx)
	defer cancel()
	err := storage.MarkFailed(fctx, e.Store, rec, e.clock(), description, f)
	e.emit(rec.Name, rec.Revision, PhaseDone, "", string(storage.StatusFailed), description)
	if err != nil {
		return fmt.Errorf("mark release %s revision %d failed: %w", rec.Name, rec.Revision, err)
	}
	return nil
}

// applyFailure is the diagnosis of an apply the cluster refused.
func applyFailure(err error) *rollout.Diagnosis {
	f := &rollout.Diagnosis{Reason: "ApplyFailed", Message: err.Error()}
	var ce *cluster.FieldConflictError
	var uk *cluster.UnknownKindError
	switch {
	case errors.As(err, &ce):
		f.Reason = "FieldManagerConflict"
		f.Object = objectName(ce.Object.Kind, ce.Object.Name)
	case errors.As(err, &uk):
		f.Reason = "UnknownKind"
		f.Object = objectName(uk.Object.Kind, uk.Object.Name)
	}
	return f
}

// pruneObjects deletes the objects of previous that objs no longer has and
// reports them; it returns the deleted ones.
func (e *Engine) pruneObjects(ctx context.Context, rec *storage.Release, previous, objs []*unstructured.Unstructured) ([]object.Ref, error) {
	if len(previous) == 0 {
		return nil, nil
	}
	results, err := e.Objects.Prune(ctx, previous, objs, cluster.PruneOptions{Release: rec.Name, Namespace: e.Namespace()})
	var pruned []object.Ref
	for _, r := range results {
		e.emit(rec.Name, rec.Revision, PhasePrune, r.Object.String(), string(r.Action), r.Reason)
		if r.Action == cluster.PruneDeleted {
			pruned = append(pruned, r.Object)
		}
	}
	if err != nil {
		return pruned, fmt.Errorf("release %s revision %d: prune: %w", rec.Name, rec.Revision, err)
	}
	return pruned, nil
}

// pruneHistory applies --history-max after a revision was finished.
func (e *Engine) pruneHistory(ctx context.Context, rec *storage.Release, keep int) error {
	return e.PruneHistoryAmong(ctx, rec, keep, nil)
}

// PruneHistoryAmong is pruneHistory over known records (nil: listed).
func (e *Engine) PruneHistoryAmong(ctx context.Context, rec *storage.Release, keep int, known []storage.Entry) error {
	var deleted []int
	var err error
	if known == nil {
		deleted, err = storage.PruneHistory(ctx, e.Store, rec.Name, keep)
	} else {
		deleted, err = storage.PruneHistoryAmong(ctx, e.Store, rec.Name, keep, known)
	}
	for _, d := range deleted {
		e.emit(rec.Name, rec.Revision, PhaseHistory, "", "deleted", fmt.Sprintf("record of revision %d (history max %d)", d, keep))
	}
	if err != nil {
		return fmt.Errorf("release %s: prune history: %w", rec.Name, err)
	}
	return nil
}
