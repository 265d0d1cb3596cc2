// scenarios_analysis.go holds the canary analysis scenario: what an analysis adds to a canary hold.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// The analysed window of the analysis scenario (interval × count), and
// the canary hold of the run without an analysis that lasts as long.
const (
	analysisInterval = 4
	analysisCount    = 3
	analysisWindow   = analysisInterval * analysisCount
)

// analysisSpec is the scenario's analysis: the scrape provider (each
// pod's /metrics through the API server's port-forward) with the
// synthetic load, the three presets a canary's first minutes are judged
// by.
var analysisSpec = fmt.Sprintf(`interval: %ds
count: %d
minRequests: 4
load: {rps: 6, maxTokens: 4, prompt: "Say hello"}
presets:
  errorRatio: {max: 0.05}
  ttftP95Ratio: {max: 2}
  e2eLatencyP95Ratio: {max: 2}
`, analysisInterval, analysisCount)

// analysis: vllmctl alone, the healthy 3-replica upgrade through a 1-pod
// canary held 12 s without an analysis vs held 1 s with an analysis of
// 3 × 4 s. Each analysed run's note says what the analysis added beyond
// its window (the holding phase's duration less 12 s: the last
// measurement's scrape and the end of the load) and the API requests it
// added per measurement (its run's requests less those of the plain hold
// of the same round, ÷ 3: the port-forward streams of the scrapes and of
// the load).
func (b *bench) analysis(ctx context.Context) error {
	values := b.file("values.yaml")
	spec := b.file("analysis.yaml")
	if err := os.WriteFile(spec, []byte(analysisSpec), 0o644); err != nil {
		return err
	}
	s := newScenario("vllmctl-canary-analysis",
		fmt.Sprintf("vllmctl deploy of the healthy upgrade through a 1-pod canary: held %ds without an analysis vs held 1s with an analysis of %d × %ds "+
			"(scrape provider, load 6 rps, 3 presets); note: the analysis' time beyond its window, and its API requests per measurement", analysisWindow, analysisCount, analysisInterval),
		"hold-12s", "analysis-3x4s")
	for i := 1; i <= b.o.runs; i++ {
		var holdRequests int64 = -1
		for _, tool := range s.tools {
			flags := []string{"--canary", "1", "--canary-hold", fmt.Sprintf("%ds", analysisWindow)}
			if tool != "hold-12s" {
				flags = []string{"--canary", "1", "--canary-hold", "1s", "--analysis", spec}
			}
			r, err := b.attempt(ctx, s.name, func() (run, error) {
				return b.fresh(ctx, "an", func(ns string) (run, error) {
					if err := b.install(ctx, "vllmctl", ns, values); err != nil {
						return run{}, err
					}
					st := b.vllmctlDeploy(ns, values, "image.tag="+newTag)
					st.argv = append(st.argv, flags...)
					r, err := b.measure(ctx, st)
					if err != nil {
						return r, err
					}
					held, forwards, err := holding(r)
					if err != nil {
						return r, err
					}
					if tool == "hold-12s" {
						holdRequests = r.Requests
						r.Note = fmt.Sprintf("holding %.2fs, %d port-forwards", held, forwards)
						return r, nil
					}
					r.Note = fmt.Sprintf("holding %.2fs: +%.2fs beyond the %ds window; %d port-forwards", held, held-analysisWindow, analysisWindow, forwards)
					if holdRequests >= 0 {
						r.Note += fmt.Sprintf("; +%d requests vs hold-12s = %.1f per measurement", r.Requests-holdRequests,
							float64(r.Requests-holdRequests)/analysisCount)
					}
					return r, nil
				})
			})
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if r.Note != "" {
				progress("%s %s: %s", s.name, tool, r.Note)
			}
			b.add(s, tool, r, err)
		}
	}
	b.finish(s)
	return nil
}

// holding reads a deploy's result: its canary promoted (and, with an
// analysis, passed), the holding phase's duration; and the port-forward
// requests of the run.
func holding(r run) (float64, int, error) {
	var res struct {
		Canary *struct {
			Outcome string `json:"outcome"`
			Phases  []struct {
				Name            string  `json:"name"`
				DurationSeconds float64 `json:"durationSeconds"`
			} `json:"phases"`
		} `json:"canary"`
		Analysis *struct {
			Outcome string `json:"outcome"`
		} `json:"analysis"`
	}
	if err := json.Unmarshal(r.stdout, &res); err != nil {
		return 0, 0, fmt.Errorf("vllmctl result document: %w: %s", err, tail(r.stdout, 5))
	}
	if res.Canary == nil || res.Canary.Outcome != "promoted" {
		return 0, 0, fmt.Errorf("the canary was not promoted: %s", tail(r.stdout, 20))
	}
	if res.Analysis != nil && res.Analysis.Outcome != "passed" {
		return 0, 0, fmt.Errorf("the analysis did not pass (%s): %s", res.Analysis.Outcome, tail(r.stdout, 20))
	}
	forwards := 0
	for k, n := range r.byKey {
		if strings.HasSuffix(k, "/portforward") {
			forwards += n
		}
	}
	for _, p := range res.Canary.Phases {
		if p.Name == "holding" {
			return p.DurationSeconds, forwards, nil
		}
	}
	return 0, forwards, fmt.Errorf("no holding phase in the canary's phases")
}
