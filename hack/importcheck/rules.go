package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Rules is the rules file: which rooms of the module may import what.
type Rules struct {
	Rules []Rule `yaml:"rules"`
}

// Rule restricts what the packages of one room reach, directly or through
// any number of other packages. An import matching a Forbidden prefix is a
// violation unless a longer Allowed prefix matches it too.
type Rule struct {
	// Name says which rule a violation broke; Why says what it protects.
	Name string `yaml:"name"`
	Why  string `yaml:"why"`
	// Packages are the room: the import path prefixes of the packages the
	// rule binds.
	Packages  []string `yaml:"packages"`
	Forbidden []string `yaml:"forbidden"`
	Allowed   []string `yaml:"allowed"`
}

// readRules reads the rules file at path; module is the module's path,
// which a prefix starting with "." stands for ("./runtime" is
// module+"/runtime", "." the whole module).
func readRules(path, module string) (Rules, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Rules{}, fmt.Errorf("read rules: %w", err)
	}
	var rs Rules
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&rs); err != nil {
		return Rules{}, fmt.Errorf("parse rules %s: %w", path, err)
	}
	for i := range rs.Rules {
		if err := rs.Rules[i].resolve(module); err != nil {
			return Rules{}, fmt.Errorf("rules %s: rule %d (%q): %w", path, i+1, rs.Rules[i].Name, err)
		}
	}
	return rs, nil
}

// resolve checks r and writes its module-relative prefixes as import paths.
func (r *Rule) resolve(module string) error {
	switch {
	case r.Name == "":
		return errors.New("no name")
	case len(r.Packages) == 0:
		return errors.New("no packages: a rule must bind some room")
	case len(r.Forbidden) == 0:
		return errors.New("nothing forbidden")
	}
	for _, list := range [][]string{r.Packages, r.Forbidden, r.Allowed} {
		for i, p := range list {
			abs, err := absolute(p, module)
			if err != nil {
				return err
			}
			list[i] = abs
		}
	}
	return nil
}

func absolute(prefix, module string) (string, error) {
	switch {
	case prefix == "" || strings.HasSuffix(prefix, "/"):
		return "", fmt.Errorf("prefix %q: write a path without a trailing slash", prefix)
	case prefix == ".":
		return module, nil
	case strings.HasPrefix(prefix, "./"):
		return module + "/" + strings.TrimPrefix(prefix, "./"), nil
	case strings.HasPrefix(prefix, "."):
		return "", fmt.Errorf("prefix %q: a module path starts with ./", prefix)
	}
	return prefix, nil
}

// under: path is prefix or inside it, by whole path elements ("k8s.io"
// holds "k8s.io/api" but not "k8s.iox").
func under(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// longest is the length of the longest of prefixes that holds path, -1
// when none does.
func longest(path string, prefixes []string) int {
	n := -1
	for _, p := range prefixes {
		if under(path, p) && len(p) > n {
			n = len(p)
		}
	}
	return n
}

func (r Rule) binds(pkg string) bool { return longest(pkg, r.Packages) >= 0 }

// forbids: imp matches a forbidden prefix and no longer allowed one.
func (r Rule) forbids(imp string) bool {
	f := longest(imp, r.Forbidden)
	return f >= 0 && f >= longest(imp, r.Allowed)
}
