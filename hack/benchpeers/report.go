// report.go holds the figures: statistics per scenario, the tables and the JSON report.

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// ---------------------------------------------------------------------------
// Figures.

type stats struct {
	Runs             []run   `json:"runs"`
	Median           float64 `json:"median"`
	Min              float64 `json:"min"`
	Max              float64 `json:"max"`
	MedianRequests   float64 `json:"medianRequests"`
	MinRequests      int64   `json:"minRequests"`
	MaxRequests      int64   `json:"maxRequests"`
	MedianWatches    float64 `json:"medianWatches"`
	MedianKiBRead    float64 `json:"medianKiBRead"`
	MedianMaxRSSMiB  float64 `json:"medianMaxRSSMiB"`
	MedianCPUSeconds float64 `json:"medianCPUSeconds"`
	Failed           int     `json:"failed,omitempty"`
	// Scenarios measuring a recovery: the median process start to exit,
	// the runs that did not recover within the limit, and a summary.
	MedianToolSeconds float64            `json:"medianToolSeconds,omitempty"`
	Stuck             int                `json:"stuck,omitempty"`
	Outcome           string             `json:"outcome,omitempty"`
	VllmctlRatio      map[string]float64 `json:"vllmctlRatio,omitempty"`
	// MedianRequestsPerTarget: the fleet scenarios' median requests of
	// each target, by target name.
	MedianRequestsPerTarget map[string]float64 `json:"medianRequestsPerTarget,omitempty"`
	// LastRunRequests are the last good run's requests by method and path
	// (namespace generalised).
	LastRunRequests map[string]int `json:"lastRunRequests,omitempty"`
}

type report struct {
	Generated string `json:"generated"`
	Quick     bool   `json:"quick"`
	// Direct: the tools talked to the API server without the counting
	// proxy (-direct); requests and bytes were not counted.
	Direct       bool                         `json:"direct,omitempty"`
	Runs         int                          `json:"runsPerTool"`
	Versions     map[string]string            `json:"versions"`
	Descriptions map[string]string            `json:"descriptions"`
	Scenarios    map[string]map[string]*stats `json:"scenarios"`
}

// scenario collects the runs of the tools compared in one scenario.
type scenario struct {
	name, title string
	tools       []string
	runs        map[string][]run
	failed      map[string]int
	resources   bool // show peak RSS and CPU time in the table
	outcome     bool // runs measure a recovery: show the tool's exit time and the outcome
	perTarget   bool // fleet runs: show the median requests of each target
}

func newScenario(name, title string, tools ...string) *scenario {
	return &scenario{name: name, title: title, tools: tools, runs: map[string][]run{}, failed: map[string]int{}}
}

// add records one run of tool; a failed run is reported and counted as a
// failure, not as a figure.
func (b *bench) add(s *scenario, tool string, r run, err error) {
	n := len(s.runs[tool]) + s.failed[tool] + 1
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return
		}
		s.failed[tool]++
		b.failures.Add(1)
		r.Error = err.Error()
		progress("%s: %s run %d FAILED: %v", s.name, tool, n, err)
		return
	}
	s.runs[tool] = append(s.runs[tool], r)
	extra := ""
	if r.Outcome != "" {
		extra = fmt.Sprintf(", tool exit %.2fs, %s", r.ToolSeconds, r.Outcome)
	}
	if r.Note != "" {
		extra += " (" + r.Note + ")"
	}
	if len(r.PerTarget) > 0 {
		per := map[string]float64{}
		for t, n := range r.PerTarget {
			per[t] = float64(n)
		}
		extra += "; requests per target: " + perTargetText(per)
	}
	requests := fmt.Sprintf("%d requests (%d watches)", r.Requests, r.Watches)
	if !b.counted(s) {
		requests = "requests not counted"
	}
	progress("%s: %s run %d: %.2fs, %s, exit %d, %.0f MiB, %.2f CPU-s%s",
		s.name, tool, n, r.Seconds, requests, r.ExitCode, r.MaxRSSMiB, r.CPUSeconds, extra)
}

// counted reports whether a proxy counted the requests of s's runs: not
// with -direct, but for the fleet scenarios, whose targets keep proxies
// of their own.
func (b *bench) counted(s *scenario) bool {
	return !b.o.direct || s.perTarget
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func summarize(runs []run) *stats {
	st := &stats{Runs: runs}
	if len(runs) == 0 {
		st.Median, st.Min, st.Max = math.NaN(), math.NaN(), math.NaN()
		return st
	}
	var secs, reqs, watches, kib, rss, cpu, tool []float64
	st.Min, st.Max = math.Inf(1), math.Inf(-1)
	st.MinRequests, st.MaxRequests = math.MaxInt64, 0
	for _, r := range runs {
		secs = append(secs, r.Seconds)
		reqs = append(reqs, float64(r.Requests))
		watches = append(watches, float64(r.Watches))
		kib = append(kib, float64(r.BytesRead)/1024)
		rss = append(rss, r.MaxRSSMiB)
		cpu = append(cpu, r.CPUSeconds)
		tool = append(tool, r.ToolSeconds)
		if r.Stuck {
			st.Stuck++
		}
		st.Min, st.Max = math.Min(st.Min, r.Seconds), math.Max(st.Max, r.Seconds)
		st.MinRequests, st.MaxRequests = min(st.MinRequests, r.Requests), max(st.MaxRequests, r.Requests)
	}
	st.Median, st.MedianRequests, st.MedianWatches, st.MedianKiBRead = median(secs), median(reqs), median(watches), median(kib)
	st.MedianMaxRSSMiB, st.MedianCPUSeconds, st.MedianToolSeconds = median(rss), median(cpu), median(tool)
	st.LastRunRequests = runs[len(runs)-1].byKey
	perTarget := map[string][]float64{}
	for _, r := range runs {
		for t, n := range r.PerTarget {
			perTarget[t] = append(perTarget[t], float64(n))
		}
	}
	for t, ns := range perTarget {
		if st.MedianRequestsPerTarget == nil {
			st.MedianRequestsPerTarget = map[string]float64{}
		}
		st.MedianRequestsPerTarget[t] = median(ns)
	}
	return st
}

// finish prints the scenario's table and adds it to the report. The first
// tool is the reference: the ratio column is its median over each other
// tool's (wall time, requests).
func (b *bench) finish(s *scenario) {
	all := map[string]*stats{}
	for _, t := range s.tools {
		st := summarize(s.runs[t])
		st.Failed = s.failed[t]
		all[t] = st
	}
	ref := all[s.tools[0]]
	for _, t := range s.tools[1:] {
		all[t].VllmctlRatio = map[string]float64{
			"wall":     ref.Median / all[t].Median,
			"requests": ref.MedianRequests / all[t].MedianRequests,
		}
		if s.outcome && (ref.Stuck > 0 || all[t].Stuck > 0) {
			// A stuck run's time is a lower bound: no wall ratio.
			delete(all[t].VllmctlRatio, "wall")
		}
	}
	if s.outcome {
		for _, t := range s.tools {
			st := all[t]
			switch n := len(st.Runs); {
			case n == 0:
				st.Outcome = "no run"
			case st.Stuck == 0:
				st.Outcome = fmt.Sprintf("recovered %d/%d", n, n)
			default:
				st.Outcome = fmt.Sprintf("stuck %d/%d (not recovered in %.0f s)", st.Stuck, n, st.Max)
			}
		}
	}
	b.report.Scenarios[s.name] = all
	b.report.Descriptions[s.name] = s.title

	counted := b.counted(s)
	if !counted {
		for _, t := range s.tools[1:] {
			delete(all[t].VllmctlRatio, "requests")
		}
	}
	out := b.out
	if out == nil {
		out = os.Stdout
	}
	fmt.Fprintf(out, "\n%s — %s\n", s.name, s.title)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "tool\truns\tmedian s\tmin s\tmax s\trequests\twatches\tKiB read\t"
	if s.resources {
		header += "peak RSS MiB\tCPU s\t"
	}
	if s.outcome {
		header += "tool exit s\toutcome\t"
	}
	if s.perTarget {
		header += "requests per target\t"
	}
	header += fmt.Sprintf("%s/tool wall\t%s/tool requests\t", s.tools[0], s.tools[0])
	fmt.Fprintln(tw, header)
	for _, t := range s.tools {
		st := all[t]
		runs := strconv.Itoa(len(st.Runs))
		if st.Failed > 0 {
			runs += fmt.Sprintf(" (+%d failed)", st.Failed)
		}
		line := fmt.Sprintf("%s\t%s\t%.2f\t%.2f\t%.2f\t", t, runs, st.Median, st.Min, st.Max)
		if counted {
			line += fmt.Sprintf("%.0f\t%.0f\t%.0f\t", st.MedianRequests, st.MedianWatches, st.MedianKiBRead)
		} else {
			line += "-\t-\t-\t"
		}
		if s.resources {
			line += fmt.Sprintf("%.0f\t%.2f\t", st.MedianMaxRSSMiB, st.MedianCPUSeconds)
		}
		if s.outcome {
			line += fmt.Sprintf("%.2f\t%s\t", st.MedianToolSeconds, st.Outcome)
		}
		if s.perTarget {
			line += perTargetText(st.MedianRequestsPerTarget) + "\t"
		}
		if r := st.VllmctlRatio; r != nil {
			wall := "-"
			if w, ok := r["wall"]; ok {
				wall = fmt.Sprintf("%.2fx", w)
			}
			reqs := "-"
			if counted {
				reqs = fmt.Sprintf("%.2fx", r["requests"])
			}
			line += fmt.Sprintf("%s\t%s\t", wall, reqs)
		} else {
			line += "-\t-\t"
		}
		fmt.Fprintln(tw, line)
	}
	_ = tw.Flush()
}

// perTargetText is "a1 24, b1 24" (targets by name; "-": none).
func perTargetText(m map[string]float64) string {
	if len(m) == 0 {
		return "-"
	}
	names := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %.0f", n, m[n])
	}
	return strings.Join(parts, ", ")
}

func (b *bench) writeJSON() error {
	if b.o.out == "" {
		return nil
	}
	data, err := json.MarshalIndent(b.report, "", "  ")
	if err != nil {
		return err
	}
	// NaN (no successful run) is not JSON: it becomes null.
	data = regexp.MustCompile(`\bNaN\b|[+-]Inf\b`).ReplaceAll(data, []byte("null"))
	if err := os.WriteFile(b.o.out, append(data, '\n'), 0o644); err != nil {
		return err
	}
	progress("figures written to %s", b.o.out)
	return nil
}
