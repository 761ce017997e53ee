# Sourced by the tests that scrape real Lockstep processes with a real
# Prometheus (e2e/tests/test-alert-rules.sh, tests/dashboards/coordinator-scrape.sh):
# turn what Prometheus holds into a catalogue of metric names and label names,
# hold the dashboards against it, and keep tests/dashboards/scraped-series.json
# (the offline test's catalogue) true to it. Needs curl, jq; the caller defines
# fail().

SCRAPED_SERIES=${SCRAPED_SERIES:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/scraped-series.json}

# series_catalogue PORT [NETNS]: {"metric": ["label", ...]} of every series the
# Prometheus on 127.0.0.1:PORT holds (target labels included, __name__ not).
series_catalogue() {
  local cmd=(curl -sf --get "http://127.0.0.1:$1/api/v1/series" --data-urlencode 'match[]={__name__=~".+"}')
  if [[ -n ${2:-} ]]; then cmd=(ip netns exec "$2" "${cmd[@]}"); fi
  "${cmd[@]}" | jq -S '[.data[] | {name: .__name__, labels: (keys - ["__name__"])}] | group_by(.name)
    | map({key: .[0].name, value: (map(.labels) | add | unique)}) | from_entries'
}

# series_has PORT METRIC [NETNS]: Prometheus holds a series of METRIC.
series_has() {
  local cmd=(curl -sf --get "http://127.0.0.1:$1/api/v1/series" --data-urlencode "match[]=$2")
  if [[ -n ${3:-} ]]; then cmd=(ip netns exec "$3" "${cmd[@]}"); fi
  "${cmd[@]}" | jq -e '.data | length > 0' >/dev/null
}

# check_scraped_section SECTION LIVE.json USED.json: every metric and label
# that scraped-series.json records under SECTION is in LIVE (what this run
# really scraped). With LOCKSTEP_UPDATE_SCRAPED_SERIES=1 the section is
# replaced instead by LIVE's metrics that USED (dashboard-lint --used-out: the
# metrics the dashboards select) names, with every label they carried.
check_scraped_section() {
  local section=$1 live=$2 used=$3 missing
  if [[ ${LOCKSTEP_UPDATE_SCRAPED_SERIES:-} == 1 ]]; then
    local tmp
    tmp=$(mktemp)
    jq -S --arg s "$section" --slurpfile live "$live" --slurpfile used "$used" \
      '.sources[$s] = ($live[0] | with_entries(select(.key as $k | $used[0] | index($k))))' "$SCRAPED_SERIES" >"$tmp"
    cat "$tmp" >"$SCRAPED_SERIES" && rm -f "$tmp"
    echo "updated section $section of $SCRAPED_SERIES"
    return 0
  fi
  missing=$(jq -r --arg s "$section" --slurpfile live "$live" '
    (.sources[$s] // error("no section \($s)")) | to_entries[]
    | .key as $m | .value[] as $l
    | select(($live[0][$m] // []) | index($l) | not) | "\($m){\($l)}"' "$SCRAPED_SERIES") ||
    fail "cannot read section $section of $SCRAPED_SERIES"
  [[ -z $missing ]] || fail "scraped-series.json ($section) records what this real scrape did not export:
$missing
(rerun with LOCKSTEP_UPDATE_SCRAPED_SERIES=1 to record what it did export)"
}
