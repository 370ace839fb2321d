package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRequestsOf(t *testing.T) {
	tests := map[string]struct {
		page string
		want requestCounts
	}{
		"summed by verb and resource over codes and scopes": {
			page: `# HELP apiserver_request_total x
apiserver_request_total{code="200",resource="instances",scope="namespace",verb="PATCH"} 3
apiserver_request_total{code="409",resource="instances",scope="namespace",verb="PATCH"} 2
apiserver_request_total{code="200",resource="instances",subresource="status",verb="PATCH"} 4
`,
			want: requestCounts{"PATCH instances": 5, "PATCH instances/status": 4},
		},
		"no resource and other series left out": {
			page: `apiserver_request_total{code="200",verb="GET"} 7
apiserver_request_duration_seconds_count{resource="instances",verb="GET"} 9
`,
			want: requestCounts{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sc, err := parseScrape(strings.NewReader(tc.page))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, requestsOf(sc)); diff != "" {
				t.Errorf("requestsOf (-want,+got):\n%s", diff)
			}
		})
	}
}
