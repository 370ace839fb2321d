// Command gen writes argocd-cm.yaml from the .lua files. Run it from
// config/argocd (go generate does).
package main

import (
	"fmt"
	"os"

	"github.com/unitlet/unitlet/config/argocd"
)

func main() {
	out, err := argocd.Snippet()
	if err == nil {
		err = os.WriteFile(argocd.SnippetFile, out, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
