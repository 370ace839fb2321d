// Command checklinks fails when a markdown file's link points at nothing:
// a relative path that does not exist, an anchor no heading makes, a path
// that leaves the repository, or an address outside it (the docs ship in
// the repository and must read the same offline). `make verify` runs it
// from the module's root:
//
//	go run ./hack/checklinks README.md docs/*.md docs/reports/*.md
package main

import (
	"fmt"
	"os"
)

func main() {
	os.Exit(run(".", os.Args[1:]))
}

// run checks files (paths relative to root) and returns the exit code: 0
// when every link resolves, 1 on a broken one, 2 when a file is unreadable.
func run(root string, files []string) int {
	if len(files) == 0 {
		fmt.Fprintln(os.Stderr, "checklinks: name the markdown files to check")
		return 2
	}
	problems, err := checkFiles(os.DirFS(root), files)
	if err != nil {
		fmt.Fprintf(os.Stderr, "checklinks: %v\n", err)
		return 2
	}
	for _, p := range problems {
		fmt.Fprintf(os.Stderr, "checklinks: %s\n", p)
	}
	if len(problems) > 0 {
		return 1
	}
	return 0
}
