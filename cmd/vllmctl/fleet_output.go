package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/vllmctl/vllmctl/fleet"
)

// writeFleetResult prints the result of fleet deploy: a summary and a
// table of the targets, or one JSON/YAML document.
func writeFleetResult(w io.Writer, format string, res *fleet.Result) error {
	if format != "table" {
		return writeRecordDocument(w, format, res)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "FLEET: %s\nRELEASE: %s\nOUTCOME: %s\nWAVE: %d/%d\n", recordCell(res.File), res.Release, res.Outcome, res.Wave, res.Waves)
	if res.Failure != "" {
		fmt.Fprintf(&b, "FAILURE: %s\n", recordCell(res.Failure))
	}
	pol := string(res.Policy.OnFailure)
	if res.Policy.Applied {
		pol += " (applied"
		if len(res.Policy.RolledBack) > 0 {
			pol += "; rolled back: " + rollbackCell(res.Policy.RolledBack)
		}
		if len(res.Policy.NotRolledBack) > 0 {
			pol += "; not rolled back: " + rollbackCell(res.Policy.NotRolledBack)
		}
		pol += ")"
	}
	fmt.Fprintf(&b, "POLICY: %s\n", recordCell(pol))
	for _, g := range res.Gates {
		fmt.Fprintf(&b, "GATE AFTER WAVE %d: exit %d (%s)\n", g.Wave, g.ExitCode, formatSeconds(g.DurationSeconds))
	}
	fmt.Fprintf(&b, "DURATION: %s\n\n", formatSeconds(res.DurationSeconds))
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	tw := newRecordTable(w)
	fmt.Fprintln(tw, "TARGET\tCONTEXT\tNAMESPACE\tWAVE\tBEFORE\tAFTER\tOUTCOME\tEXIT\tREASON\tCAUSE\tDURATION")
	for _, t := range res.Targets {
		reason := t.Reason
		if reason == "" && t.Error != "" {
			reason = t.Error
		}
		if t.Phase != "" && reason != "" {
			reason = t.Phase + ": " + reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", t.Name, recordCell(t.Context), t.Namespace, t.Wave,
			revisionCell(t.RevisionBefore), revisionCell(t.RevisionAfter), t.Outcome, t.ExitCode,
			recordCell(shorten(reason, 80)), recordCell(t.Cause), formatSeconds(t.DurationSeconds))
	}
	return tw.Flush()
}

func rollbackCell(prs []fleet.PolicyRollback) string {
	parts := make([]string, len(prs))
	for i, p := range prs {
		parts[i] = fmt.Sprintf("%s %d→%d", p.Target, p.From, p.To)
		if p.Error != "" {
			parts[i] = p.Target + ": " + p.Error
		}
	}
	return strings.Join(parts, ", ")
}

func revisionCell(r int) string {
	if r == 0 {
		return "-"
	}
	return strconv.Itoa(r)
}

// shorten cuts s to n runes.
func shorten(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// writeFleetDiff prints fleet diff: each target's diff under a header,
// or one JSON/YAML document.
func writeFleetDiff(w io.Writer, format string, res *fleet.DiffResult) error {
	if format != "table" {
		return writeRecordDocument(w, format, res)
	}
	for _, t := range res.Targets {
		state := "no changes"
		switch {
		case t.Error != "":
			state = "error: " + t.Error
		case t.Changes:
			state = fmt.Sprintf("%d object(s) change", len(t.Report.Objects))
		}
		if _, err := fmt.Fprintf(w, "=== %s (context %s, namespace %s, wave %d): %s\n", t.Name, recordCell(t.Context), t.Namespace, t.Wave, recordCell(state)); err != nil {
			return err
		}
		if t.Changes {
			if err := t.Report.WriteText(w, colorOutput(w)); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeFleetStatus prints fleet status: a table of the targets, or one
// JSON/YAML document.
func writeFleetStatus(w io.Writer, format string, res *fleet.StatusResult) error {
	if format != "table" {
		return writeRecordDocument(w, format, res)
	}
	tw := newRecordTable(w)
	fmt.Fprintln(tw, "TARGET\tCONTEXT\tNAMESPACE\tWAVE\tREVISION\tSTATUS\tCHART\tREADY\tERROR")
	for _, t := range res.Targets {
		ready := fmt.Sprintf("%d/%d", t.ReadyObjects, t.Objects)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", t.Name, recordCell(t.Context), t.Namespace, t.Wave,
			revisionCell(t.Revision), t.Status, recordCell(t.Chart), ready, recordCell(shorten(t.Error, 80)))
	}
	return tw.Flush()
}
