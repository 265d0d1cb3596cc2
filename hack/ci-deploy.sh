#!/usr/bin/env bash
# ci-deploy.sh: one pipeline step around `vllmctl deploy`, shared by the
# GitHub Actions and GitLab CI examples in the README.
#
#   hack/ci-deploy.sh RELEASE [CHART] [deploy flags...]
#   e.g. hack/ci-deploy.sh qwen -n inference -f prod.yaml --set image.tag=v0.11.1 --timeout 20m
#
# It runs `vllmctl deploy ... -o json`, the progress going to the job log,
# and writes into $CI_DEPLOY_OUT (default ./vllmctl-deploy), the artifact to
# publish:
#   result.json  deploy's result document (empty when nothing was deployed)
#   deploy.log   the progress and errors (stderr)
#   summary.md   the outcome and, for a failed rollout, the diagnosis:
#                failure.reason, cause, evidence, pod, hints, events, logTail
#   outcome      one word: deployed, bad-input, rolled-back, failed, locked,
#                cluster-refused or error
# The summary is appended to $GITHUB_STEP_SUMMARY and outcome/exit-code are
# written to $GITHUB_OUTPUT when they are set (GitHub Actions), and printed
# at the end of the job log. The script exits with vllmctl's exit code, so a
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

# r FILTER: a field of the result document ("" when there is none).
r() { [ -s "$out/result.json" ] && jq -r "$1 // empty" "$out/result.json" 2>/dev/null; }

release=$(r .release); release=${release:-$1}
{
  echo "### vllmctl deploy $release: $outcome (exit $code)"
  echo
  echo "$headline"
  echo
  if [ -s "$out/result.json" ]; then
    r '"release \(.release), namespace \(.namespace), revision \(.revision): \(.status)" +
       (if .description then " (\(.description))" else "" end) +
       (if .rolledBackTo then ", rolled back to revision \(.rolledBackTo)" else "" end)'
    if [ -n "$(r .failure)" ]; then
      echo
      r '.failure | "| | |", "|---|---|",
        ([["reason", .reason], ["cause", .cause],
          ["evidence", (if (.evidence // "") != "" then "`\(.evidence)`" else "" end)],
          ["object", .object], ["pod", .pod],
          ["container", (if .container then "\(.container): exit code \(.exitCode // 0), \(.restartCount // 0) restarts" else "" end)],
          ["message", .message]][]
         | select((.[1] // "") != "") | "| \(.[0]) | \(.[1] | gsub("\\|"; "\\|")) |")'
      hints=$(r '.failure.hints[]? | "- \(.)"')
      [ -n "$hints" ] && printf '\nHints:\n%s\n' "$hints"
      events=$(r '.failure.events[]?')
      [ -n "$events" ] && printf '\n<details><summary>events</summary>\n\n```\n%s\n```\n</details>\n' "$events"
      logs=$(r '.failure.logTail[]?')
      [ -n "$logs" ] && printf '\n<details><summary>log tail</summary>\n\n```\n%s\n```\n</details>\n' "$logs"
    fi
  fi
  if [ "$code" -ne 0 ]; then
    errors=$(grep -E '^(Error|warning): ' "$out/deploy.log" | tail -n 5)
    [ -n "$errors" ] && printf '\n```\n%s\n```\n' "$errors"
  fi
} >"$out/summary.md"

if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then cat "$out/summary.md" >>"$GITHUB_STEP_SUMMARY"; fi
if [ -n "${GITHUB_OUTPUT:-}" ]; then printf 'outcome=%s\nexit-code=%s\n' "$outcome" "$code" >>"$GITHUB_OUTPUT"; fi
echo >&2
cat "$out/summary.md" >&2
exit "$code"
