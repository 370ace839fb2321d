package main

import (
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

func TestCheckFiles(t *testing.T) {
	tree := fstest.MapFS{
		"README.md":           {Data: []byte("# unitlet\n")},
		"config/rbac/a.yaml":  {Data: []byte("x")},
		"docs/guide.md":       {Data: []byte("# Guide\n\n## Capacity and `--reserved`\n\n## Alerts and runbooks\n\n### UnitletAgentDown\n\n## Notes\n\n## Notes\n")},
		"docs/reports/run.md": {Data: []byte("# Run\n")},
	}
	cases := map[string]struct {
		doc  string
		want []Problem
	}{
		"a sibling, a parent's file and a directory resolve": {
			doc: "[g](guide.md) [r](../README.md) [c](../config/rbac) [x](reports/run.md)\n",
		},
		"anchors GitHub makes, in this file and another": {
			doc: "# Here\n[a](#here) [b](guide.md#capacity-and---reserved) [c](guide.md#unitletagentdown) [d](guide.md#notes-1)\n",
		},
		"the repository's own address": {
			doc: "see https://github.com/unitlet/unitlet/blob/main/docs/guide.md#unitletagentdown\n",
		},
		"links in code are not links": {
			doc: "```console\n$ curl https://example.com [x](nowhere.md)\n```\n`[y](nowhere.md)` and `https://example.com`\n",
		},
		"a missing file": {
			doc:  "text\n[gone](gone.md)\n",
			want: []Problem{{File: "docs/doc.md", Line: 2, Target: "gone.md", Why: "no such file or directory (docs/gone.md)"}},
		},
		"a missing anchor": {
			doc:  "[a](guide.md#capacity)\n",
			want: []Problem{{File: "docs/doc.md", Line: 1, Target: "guide.md#capacity", Why: "no heading of docs/guide.md makes the anchor #capacity"}},
		},
		"out of the repository": {
			doc:  "[up](../../etc/passwd)\n",
			want: []Problem{{File: "docs/doc.md", Line: 1, Target: "../../etc/passwd", Why: "leaves the repository"}},
		},
		"an outside address, linked or bare": {
			doc: "[k](https://kubernetes.io/docs/) and http://example.com/x\n",
			want: []Problem{
				{File: "docs/doc.md", Line: 1, Target: "https://kubernetes.io/docs/", Why: "points outside the repository (only https://github.com/unitlet/unitlet/... may)"},
				{File: "docs/doc.md", Line: 1, Target: "http://example.com/x", Why: "points outside the repository (only https://github.com/unitlet/unitlet/... may)"},
			},
		},
		"an absolute path": {
			doc:  "[a](/docs/guide.md)\n",
			want: []Problem{{File: "docs/doc.md", Line: 1, Target: "/docs/guide.md", Why: "an absolute path; link relative to the file"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fsys := fstest.MapFS{"docs/doc.md": {Data: []byte(tc.doc)}}
			for k, v := range tree {
				fsys[k] = v
			}
			got, err := checkFiles(fsys, []string{"docs/doc.md"})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("problems (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestCheckFilesUnreadable(t *testing.T) {
	if _, err := checkFiles(fstest.MapFS{}, []string{"docs/none.md"}); err == nil {
		t.Error("a file that cannot be read: want an error, got none")
	}
}
