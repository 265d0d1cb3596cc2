package main

import "github.com/vllmctl/vllmctl/release"

// deployFlags are the flags `deploy` and `fleet deploy` share, and the one
// place their release.DeployOptions are assembled (deployOptions): each
// command then sets only what is its own.
type deployFlags struct {
	timeout         timeoutFlags
	history         historyFlags
	conflicts       conflictFlags
	unlock          unlockFlags
	rollbackTimeout rollbackTimeoutFlags
	modelFit        modelFitFlags
	analysis        analysisFlags
	createNamespace bool
	takeOwnership   bool
}

// deployOptions are the options of a deploy of release name from render,
// as the shared flags set them.
func (f *deployFlags) deployOptions(name string, render release.RenderInput, skipPreflight bool) release.DeployOptions {
	return release.DeployOptions{
		Name:            name,
		Render:          render,
		Timeout:         f.timeout.givenTimeout(),
		HistoryMax:      f.history.max,
		CreateNamespace: f.createNamespace,
		ForceConflicts:  f.conflicts.force,
		ForceUnlock:     f.unlock.force,
		TakeOwnership:   f.takeOwnership,
		RollbackTimeout: f.rollbackTimeout.timeout,
		SkipPreflight:   skipPreflight,
		ModelFit:        f.modelFit.source(),
		Analysis:        f.analysis.cfg,
		Prometheus:      f.analysis.prom,
	}
}
