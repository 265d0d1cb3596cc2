#!/usr/bin/env bash
# ci-deploy.sh: one pipeline step around `vllmctl deploy`, shared by the
# GitHub Actions and GitLab CI examples of docs/ci.md.
#
#   hack/ci-deploy.sh RELEASE [CHART] [deploy flags...]
#   e.g. hack/ci-deploy.sh qwen -n inference -f prod.yaml --set image.tag=v0.11.1 --timeout 20m
#
# It runs `vllmctl deploy ... -o json`, the progress going to the job log,
# and writes into $CI_DEPLOY_OUT (default ./vllmctl-deploy), the artifact to
# publish:
#   result.json  deploy's result document (empty when nothing was deployed)
#   deploy.log   the progress and errors (stderr)
#   summary.md   the outcome, the canary analysis' measurements (a table)
#                and, for a failed rollout, the diagnosis:
#                failure.reason, cause, evidence, pod, hints, events, logTail
#   outcome      one word: deployed, bad-input, rolled-back, failed, locked,
#                cluster-refused or error
# The summary is appended to $GITHUB_STEP_SUMMARY and outcome/exit-code are
# written to $GITHUB_OUTPUT when they are set (GitHub Actions), and printed
# at the end of the job log.
#
# The diagnosis quotes whoever controls the image or the cluster (log
# lines, events, messages). vllmctl escapes control characters and what CI
# runners take for commands in it; this script does not rely on that: in
# summary.md, one-line fields are Markdown-escaped (or code spans), events
# and log tail go in fenced blocks whose fence is longer than any run of
# backticks they hold, and no line starts with "::" or holds "##[" (GitHub
# workflow commands). On GitHub Actions ($GITHUB_ACTIONS=true) the whole
# job log of the step also goes between ::stop-commands:: and a random
# resume token. The script exits with vllmctl's exit code, so a
# pipeline can branch on it: 0 deployed, 2 bad input, 3 failed and rolled
# back, 4 failed and not rolled back, 5 locked by another operation, 6 the
# cluster refused or could not be reached.
#
# Needs bash and jq. VLLMCTL names the binary (default: vllmctl on PATH).
set -uo pipefail

if [ $# -lt 1 ]; then
  echo "usage: $0 RELEASE [CHART] [vllmctl deploy flags...]" >&2
  exit 2
fi
vllmctl=${VLLMCTL:-vllmctl}
out=${CI_DEPLOY_OUT:-vllmctl-deploy}
command -v jq >/dev/null || { echo "ci-deploy.sh: jq is needed to read the result document" >&2; exit 1; }
mkdir -p "$out"
rm -f "$out/result.json" "$out/deploy.log" "$out/summary.md" "$out/outcome"

resume=
if [ "${GITHUB_ACTIONS:-}" = true ]; then
  resume=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  echo "::stop-commands::$resume" >&2
  trap 'echo "::$resume::" >&2' EXIT
fi

# stdout (the result document) to result.json; stderr (progress, errors) to
# the job log and deploy.log. -o json comes last: it wins over the caller's.
{ "$vllmctl" deploy "$@" -o json 2>&1 1>&3 3>&- | tee "$out/deploy.log" >&2; } 3>"$out/result.json"
code=${PIPESTATUS[0]}

case $code in
  0) outcome=deployed headline="deployed" ;;
  2) outcome=bad-input headline="refused: invalid input (nothing applied, no record changed)" ;;
  3) outcome=rolled-back headline="rollout failed and was rolled back: the previous good revision is serving" ;;
  4) outcome=failed headline="rollout failed and was NOT rolled back" ;;
  5) outcome=locked headline="refused: another operation on this release is in progress (lock held)" ;;
  6) outcome=cluster-refused headline="refused: the cluster refused or could not be reached (nothing recorded as deployed)" ;;
  *) outcome=error headline="unexpected error (exit $code)" ;;
esac
echo "$outcome" >"$out/outcome"

# jq definitions for untrusted text:
#   text    one line: line breaks are spaces, other control characters "?",
#           a leading "::" and the '[' of "##[" and "##vso[" escaped
#           (\x3a, \x5b) as vllmctl escapes them;
#   md      text in Markdown prose or a table cell: the characters that make
#           links, images, HTML, entities, code, emphasis, math, headings
#           or cell ends are backslash-escaped;
#   code    text as a code span in a table cell, its fence longer than any
#           run of backticks in it;
#   fenced  an array of lines as a fenced code block that no line can close
#           (the fence is longer than any run of backticks, 3 at least);
#   block(T; L)  the lines L, if any, as a fenced block in <details> titled T.
jqdefs='
def text: tostring | gsub("[\r\n]"; " ") | gsub("[\u0000-\u0008\u000b-\u001f\u007f]"; "?")
  | sub("^(?<s>[ \t]*)::"; "\(.s)\\x3a:") | gsub("##(?<v>([vV][sS][oO])?)\\["; "##\(.v)\\x5b");
def md: text | gsub("(?<c>[\\\\`*_\\[\\]<>!|~&$#])"; "\\\(.c)");
def runs: [scan("`+") | length] | max // 0;
def code: text | ("`" * (runs + 1)) as $f | $f + " " + gsub("\\|"; "\\|") + " " + $f;
def fenced: map(text) as $l | ("`" * ([([$l[] | runs] | max // 0) + 1, 3] | max)) as $f | $f, $l[], $f;
def block($title; $lines):
  if ($lines | length) == 0 then empty
  else "", "<details><summary>\($title)</summary>", "", ($lines | fenced), "</details>" end;
'

# r FILTER: a field of the result document ("" when there is none).
r() { [ -s "$out/result.json" ] && jq -r "$jqdefs $1 // empty" "$out/result.json" 2>/dev/null; }

release=$(r .release); release=${release:-$1}
{
  echo "### vllmctl deploy $release: $outcome (exit $code)"
  echo
  echo "$headline"
  echo
  if [ -s "$out/result.json" ]; then
    r '"release \(.release), namespace \(.namespace), revision \(.revision): \(.status)" +
       (if .description then " (\(.description | md))" else "" end) +
       (if .rolledBackTo then ", rolled back to revision \(.rolledBackTo)" else "" end)'
    if [ -n "$(r .failure)" ]; then
      echo
      r '.failure | "| | |", "|---|---|",
        ([["reason", .reason], ["cause", .cause], ["evidence", .evidence], ["object", .object], ["pod", .pod],
          ["container", (if .container then "\(.container): exit code \(.exitCode // 0), \(.restartCount // 0) restarts" else "" end)],
          ["message", .message]][]
         | select((.[1] // "") != "") | "| \(.[0]) | \(if .[0] == "evidence" then .[1] | code else .[1] | md end) |")'
      hints=$(r '.failure.hints[]? | "- \(md)"')
      [ -n "$hints" ] && printf '\nHints:\n%s\n' "$hints"
      r 'block("events"; .failure.events // [])'
      r 'block("log tail"; .failure.logTail // [])'
    fi
    if [ -n "$(r .analysis)" ]; then
      echo
      r '.analysis | "Canary analysis (\(.provider)): **\(.outcome)**" + (if .reason then ": \(.reason | md)" else "" end)'
      echo
      r '"| at | metric | canary | stable | value | condition | outcome |", "|---|---|---|---|---|---|---|",
        (.analysis.measurements[]? | "| \(.at) | \(.metric | md) | \(.canary // "-") | \(.stable // "-") | \(.value // "-") | \(.condition | md) | \(.outcome) |")'
    fi
  fi
  if [ "$code" -ne 0 ]; then
    grep -aE '^(Error|warning): ' "$out/deploy.log" | tail -n 5 | jq -Rrn "$jqdefs [inputs] | if length > 0 then \"\", fenced else empty end"
  fi
} >"$out/summary.md"

if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then cat "$out/summary.md" >>"$GITHUB_STEP_SUMMARY"; fi
if [ -n "${GITHUB_OUTPUT:-}" ]; then printf 'outcome=%s\nexit-code=%s\n' "$outcome" "$code" >>"$GITHUB_OUTPUT"; fi
echo >&2
cat "$out/summary.md" >&2
exit "$code"
