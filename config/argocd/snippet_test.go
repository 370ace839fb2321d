package argocd

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

func TestCommittedSnippetIsCurrent(t *testing.T) {
	want, err := Snippet()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(SnippetFile)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s is stale; run `go generate ./config/argocd` (-generated,+committed):\n%s", SnippetFile, diff)
	}
}

// Read back as a ConfigMap, the snippet holds each .lua file byte for byte
// under the key Argo CD looks up for its kind.
func TestSnippetEmbedsTheScriptsVerbatim(t *testing.T) {
	b, err := os.ReadFile(SnippetFile)
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(b, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Kind != "ConfigMap" || cm.Metadata.Name != "argocd-cm" {
		t.Errorf("got %s %s, want ConfigMap argocd-cm", cm.Kind, cm.Metadata.Name)
	}
	for key, file := range map[string]string{InstanceKey: "instance.lua", GenerationKey: "generation.lua"} {
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), cm.Data[key]); diff != "" {
			t.Errorf("%s differs from %s (-file,+snippet):\n%s", key, file, diff)
		}
	}
}
