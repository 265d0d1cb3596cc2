// Verdicts: what the rollout watcher concluded about a rollout, or what
// vllmctl concluded around it (a canary's gate, its analysis, the serve
// check).

package rollout

// Verdict is what the rollout watcher (package wait) concluded, or concludes so far, about
// a rollout.
type Verdict string

// The verdicts. Every one but VerdictProgressing and VerdictRolledOut is a
// failure and ends the wait.
const (
	// VerdictProgressing: no conclusion yet.
	VerdictProgressing Verdict = "Progressing"
	// VerdictRolledOut: the Deployment (or StatefulSet) rolled out, by
	// kubectl rollout status' rules.
	VerdictRolledOut Verdict = "RolledOut"
	// VerdictCrashLoop: a container of a new pod is in CrashLoopBackOff and
	// has restarted at least wait.RolloutOptions.MaxRestarts times.
	VerdictCrashLoop Verdict = "CrashLoopBackOff"
	// VerdictOOMKilled: a container of a new pod was OOMKilled.
	VerdictOOMKilled Verdict = "OOMKilled"
	// VerdictImagePull: a new pod's image cannot be pulled (ErrImagePull,
	// ImagePullBackOff or InvalidImageName, seen repeatedly).
	VerdictImagePull Verdict = "ImagePullError"
	// VerdictContainerError: the kubelet could not create or start a
	// container (CreateContainerConfigError, CreateContainerError,
	// RunContainerError).
	VerdictContainerError Verdict = "ContainerError"
	// VerdictUnschedulable: a new pod stayed unschedulable longer than
	// wait.RolloutOptions.UnschedulableTimeout.
	VerdictUnschedulable Verdict = "Unschedulable"
	// VerdictProgressDeadlineExceeded: the Deployment's Progressing
	// condition says ProgressDeadlineExceeded.
	VerdictProgressDeadlineExceeded Verdict = "ProgressDeadlineExceeded"
	// VerdictFailedCreate: the new ReplicaSet, or the StatefulSet, cannot
	// create pods (e.g. exceeded quota).
	VerdictFailedCreate Verdict = "FailedCreate"
	// VerdictTimeout: the wait timed out before the rollout finished.
	VerdictTimeout Verdict = "Timeout"
	// VerdictObjectFailed: an object other than a Deployment, Job or Pod
	// that runs to completion became Failed (kstatus).
	VerdictObjectFailed Verdict = "ObjectFailed"
	// VerdictJobFailed: a Job's condition Failed is True (its backoffLimit
	// or activeDeadlineSeconds was reached, ...).
	VerdictJobFailed Verdict = "JobFailed"
	// VerdictPodFailed: a Pod that runs to completion (restartPolicy Never
	// or OnFailure) ended in phase Failed.
	VerdictPodFailed Verdict = "PodFailed"
	// VerdictKnownCause: a container of a watched pod terminated (exit code
	// not 0) and the log of that instance names a decisive cause (see
	// [vllmcause.Cause.Decisive]): the rollout fails at that first termination,
	// without waiting for wait.RolloutOptions.MaxRestarts. The Diagnosis names
	// the cause; its RestartCount is the count at that moment.
	VerdictKnownCause Verdict = "KnownCause"
	// VerdictAnalysisFailed: the canary analysis (deploy --analysis, or
	// the built-in chart's analysis values) failed: a metric's failed
	// measurements exceeded its failureLimit. The Diagnosis' evidence is
	// the last failed measurement.
	VerdictAnalysisFailed Verdict = "AnalysisFailed"
	// VerdictAnalysisInconclusive: the canary analysis could not decide
	// (too few requests, no data, the pods' metrics unreachable) and its
	// policy is inconclusive: fail (or hold: the canary is kept held).
	VerdictAnalysisInconclusive Verdict = "AnalysisInconclusive"
	// VerdictGroupRecreated: a group of a LeaderWorkerSet (of its current
	// template) was recreated wait.RolloutOptions.MaxRestarts times during the
	// wait. With restartPolicy RecreateGroupOnPodRestart (the default) the
	// LWS controller deletes and recreates a whole group at a container's
	// first restart, so its pods never reach CrashLoopBackOff. The
	// Diagnosis is the last crash of that group, with the log read at its
	// termination.
	VerdictGroupRecreated Verdict = "GroupRecreated"
	// VerdictControllerStalled: the controller of a Deployment,
	// StatefulSet, Job or LeaderWorkerSet has not acted on it (observed
	// its latest generation; for a Job, started it) for
	// wait.RolloutOptions.ControllerStallTimeout while the API server answered:
	// kube-controller-manager (or the LeaderWorkerSet controller) is not
	// running, or not acting. See wait.ControllerStalledError.
	VerdictControllerStalled Verdict = "ControllerStalled"
	// VerdictNotServing: a new (or canary) pod is Ready, but within the
	// serve check's timeout it did not list the served model on
	// /v1/models or did not complete a short request (see
	// wait.CheckServing).
	VerdictNotServing Verdict = "NotServing"
)

// Failed reports whether v is a failure verdict.
func (v Verdict) Failed() bool {
	return v != "" && v != VerdictProgressing && v != VerdictRolledOut
}

// VerdictCanaryRestarted: a container of a canary pod restarted more often
// than wait.CanaryGoal.MaxRestarts allows.
const VerdictCanaryRestarted Verdict = "CanaryRestarted"
