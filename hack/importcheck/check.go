package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"slices"
	"strings"
)

// pkg is what the check reads of `go list -json`.
type pkg struct {
	ImportPath string
	Imports    []string
	Module     *struct{ Main bool }
	Error      *struct{ Err string }
}

// graph is the module's packages and everything they import, tests left
// out: the rules are about what the binaries link.
type graph struct {
	module   string
	packages map[string]pkg
	// own are the module's packages, sorted.
	own []string
}

// load lists the module in dir with all its dependencies.
func load(dir string) (graph, error) {
	mod, err := goList(dir, "list", "-m", "-f", "{{.Path}}")
	if err != nil {
		return graph{}, err
	}
	out, err := goList(dir, "list", "-deps", "-json=ImportPath,Imports,Module,Error", "./...")
	if err != nil {
		return graph{}, err
	}
	g := graph{module: strings.TrimSpace(string(mod)), packages: map[string]pkg{}}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return graph{}, fmt.Errorf("read go list: %w", err)
		}
		if p.Error != nil {
			return graph{}, fmt.Errorf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		g.packages[p.ImportPath] = p
		if p.Module != nil && p.Module.Main {
			g.own = append(g.own, p.ImportPath)
		}
	}
	slices.Sort(g.own)
	return g, nil
}

func goList(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// Violation is one forbidden import a room reaches: Chain runs from the
// room's package to the forbidden one (two long when it imports it
// itself).
type Violation struct {
	Rule  Rule
	Chain []string
}

func (v Violation) String() string {
	from, to := v.Chain[0], v.Chain[len(v.Chain)-1]
	s := fmt.Sprintf("%s imports %s", from, to)
	if len(v.Chain) > 2 {
		s = fmt.Sprintf("%s imports %s through %s", from, to, strings.Join(v.Chain[1:len(v.Chain)-1], " -> "))
	}
	return fmt.Sprintf("%s, which rule %q forbids: %s", s, v.Rule.Name, v.Rule.Why)
}

// check applies every rule to g. A rule whose room or module-relative
// prefixes name no package of the module is an error: after a move it
// would check nothing.
func check(g graph, rules Rules) ([]Violation, error) {
	var out []Violation
	for _, r := range rules.Rules {
		if err := g.stale(r); err != nil {
			return nil, err
		}
		out = append(out, g.violations(r)...)
	}
	return out, nil
}

// violations are the forbidden imports r's room reaches, one per crossing
// edge (importer, forbidden package) with its shortest chain: every other
// package of the room that reaches the same edge adds nothing.
func (g graph) violations(r Rule) []Violation {
	shortest := map[[2]string]Violation{}
	for _, p := range g.own {
		if !r.binds(p) {
			continue
		}
		for _, v := range g.reach(p, r) {
			edge := [2]string{v.Chain[len(v.Chain)-2], v.Chain[len(v.Chain)-1]}
			if old, ok := shortest[edge]; !ok || len(v.Chain) < len(old.Chain) {
				shortest[edge] = v
			}
		}
	}
	out := slices.Collect(maps.Values(shortest))
	slices.SortFunc(out, func(a, b Violation) int { return slices.Compare(a.Chain, b.Chain) })
	return out
}

func (g graph) stale(r Rule) error {
	for _, list := range [][]string{r.Packages, r.Forbidden, r.Allowed} {
		for _, p := range list {
			if !under(p, g.module) {
				continue
			}
			if !slices.ContainsFunc(g.own, func(o string) bool { return under(o, p) }) {
				return fmt.Errorf("rule %q: %s is no package of the module (moved? update the rules file)", r.Name, p)
			}
		}
	}
	return nil
}

// reach walks from the room's package breadth first, so each chain
// is a shortest one, and stops at each forbidden package it meets.
func (g graph) reach(from string, r Rule) []Violation {
	parent := map[string]string{from: ""}
	queue := []string{from}
	var out []Violation
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, imp := range g.packages[p].Imports {
			if _, ok := parent[imp]; ok {
				continue
			}
			parent[imp] = p
			if r.forbids(imp) {
				out = append(out, Violation{Rule: r, Chain: chain(parent, imp)})
				continue
			}
			queue = append(queue, imp)
		}
	}
	return out
}

func chain(parent map[string]string, to string) []string {
	var c []string
	for p := to; p != ""; p = parent[p] {
		c = append(c, p)
	}
	slices.Reverse(c)
	return c
}
