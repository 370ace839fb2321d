// Command importcheck fails when a room of the module imports what the
// rules file forbids it, directly or through other packages (the idea of
// the kubelet's .import-restrictions, kept in one file so a relayout
// changes one place). `make verify` runs it from the module's root:
//
//	go run ./hack/importcheck [-rules hack/import-restrictions.yaml]
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	rulesPath := flag.String("rules", "hack/import-restrictions.yaml", "the rules file")
	flag.Parse()
	os.Exit(run(".", *rulesPath))
}

// run checks the module in dir; it returns the command's exit code: 0 when every rule holds, 1 on a
// violation, 2 when the check could not run.
func run(dir, rulesPath string) int {
	vs, err := checkModule(dir, rulesPath)
	if err != nil {
		fmt.Fprintf(os.Stderr, "importcheck: %v\n", err)
		return 2
	}
	for _, v := range vs {
		fmt.Fprintf(os.Stderr, "importcheck: %s\n", v)
	}
	if len(vs) > 0 {
		fmt.Fprintf(os.Stderr, "importcheck: %d forbidden import(s); the rules are in %s\n", len(vs), rulesPath)
		return 1
	}
	return 0
}

func checkModule(dir, rulesPath string) ([]Violation, error) {
	g, err := load(dir)
	if err != nil {
		return nil, err
	}
	rules, err := readRules(rulesPath, g.module)
	if err != nil {
		return nil, err
	}
	return check(g, rules)
}
