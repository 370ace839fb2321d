package prometheus

import (
	"bufio"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// runbookBase is where every alert's runbook_url points: the operator
// guide's section of that alert, by its GitHub anchor.
const runbookBase = "https://github.com/unitlet/unitlet/blob/main/docs/operator-guide.md#"

// operatorGuide is the guide the runbooks are in, relative to this directory.
var operatorGuide = filepath.Join("..", "..", "docs", "operator-guide.md")

// runbookSection is the guide's section that holds a "### <AlertName>" per alert.
const runbookSection = "## Alerts and runbooks"

// Every alert has a runbook_url of the operator guide whose anchor is a
// "### <AlertName>" heading of its runbook section.
func TestEveryAlertHasARunbook(t *testing.T) {
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `json:"alert"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	readYAML(t, RulesFile, &rules)
	guide, err := os.ReadFile(operatorGuide)
	if err != nil {
		t.Errorf("the runbooks: %v (the operator guide has a %q section with a ### heading per alert)", err, runbookSection)
	}
	anchors := runbookAnchors(string(guide))
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			url := r.Annotations["runbook_url"]
			if want := runbookBase + strings.ToLower(r.Alert); url != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, url, want)
				continue
			}
			if !anchors[strings.TrimPrefix(url, runbookBase)] {
				t.Errorf("%s: %s has no heading %q under %q: its runbook_url leads nowhere", r.Alert, operatorGuide, "### "+r.Alert, runbookSection)
			}
		}
	}
}

func TestRunbookAnchors(t *testing.T) {
	tests := map[string]struct {
		md   string
		want []string
	}{
		"headings of the section only": {
			md:   "# Guide\n### Stray\n## Alerts and runbooks\nText.\n### UnitletAgentDown\n#### Detail\n### Unitlet Node-Joining!\n## Troubleshooting\n### After\n",
			want: []string{"unitlet-node-joining", "unitletagentdown"},
		},
		"no section":      {md: "# Guide\n### UnitletAgentDown\n"},
		"in a code block": {md: "## Alerts and runbooks\n```sh\n### not a heading\n```\n### Real\n", want: []string{"real"}},
		"empty guide":     {},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := slices.Sorted(maps.Keys(runbookAnchors(tc.md)))
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}

// runbookAnchors are the GitHub anchors of the "### " headings in md's
// runbook section (fenced code left out).
func runbookAnchors(md string) map[string]bool {
	anchors := map[string]bool{}
	in, fenced := false, false
	sc := bufio.NewScanner(strings.NewReader(md))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```"):
			fenced = !fenced
		case fenced:
		case strings.HasPrefix(line, "## "):
			in = strings.TrimSpace(line) == runbookSection
		case in && strings.HasPrefix(line, "### "):
			anchors[githubAnchor(strings.TrimPrefix(line, "### "))] = true
		}
	}
	return anchors
}

var notInAnchor = regexp.MustCompile(`[^\p{L}\p{N}\- _]`)

// githubAnchor is the fragment GitHub gives a heading: lower case,
// punctuation dropped, spaces as hyphens.
func githubAnchor(heading string) string {
	s := notInAnchor.ReplaceAllString(strings.ToLower(strings.TrimSpace(heading)), "")
	return strings.ReplaceAll(s, " ", "-")
}
