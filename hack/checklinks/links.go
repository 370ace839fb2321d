package main

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"
	"unicode"
)

// ownURL is the one address outside the tree a doc may name: the
// repository's own (runbook URLs, releases).
const ownURL = "https://github.com/unitlet/unitlet/"

// Problem is one broken link, at file:line.
type Problem struct {
	File   string
	Line   int
	Target string
	Why    string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", p.File, p.Line, p.Target, p.Why)
}

var (
	// linkRE matches an inline link or image's target: [text](target).
	linkRE = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// urlRE matches an address in prose, linked or not.
	urlRE = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s)>\]` + "`" + `]+`)
	// codeSpanRE matches inline code, whose text is not a link.
	codeSpanRE = regexp.MustCompile("`[^`]*`")
)

// checkFiles checks every link of each file in fsys.
func checkFiles(fsys fs.FS, files []string) ([]Problem, error) {
	anchors := map[string]map[string]bool{}
	anchorsOf := func(file string) (map[string]bool, error) {
		if a, ok := anchors[file]; ok {
			return a, nil
		}
		b, err := fs.ReadFile(fsys, file)
		if err != nil {
			return nil, err
		}
		anchors[file] = headingAnchors(string(b))
		return anchors[file], nil
	}
	var problems []Problem
	for _, file := range files {
		file = path.Clean(file)
		b, err := fs.ReadFile(fsys, file)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", file, err)
		}
		for _, l := range links(string(b)) {
			if why := resolve(fsys, file, l.target, anchorsOf); why != "" {
				problems = append(problems, Problem{File: file, Line: l.line, Target: l.target, Why: why})
			}
		}
	}
	return problems, nil
}

type link struct {
	line   int
	target string
}

// links lists the link targets and bare addresses of a markdown text,
// outside fenced code blocks and inline code.
func links(text string) []link {
	var out []link
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		prose := codeSpanRE.ReplaceAllString(line, "")
		seen := map[string]bool{}
		for _, m := range linkRE.FindAllStringSubmatch(prose, -1) {
			out = append(out, link{line: i + 1, target: m[1]})
			seen[m[1]] = true
		}
		for _, u := range urlRE.FindAllString(prose, -1) {
			if !seen[u] {
				out = append(out, link{line: i + 1, target: u})
			}
		}
	}
	return out
}

// resolve says what is wrong with target, linked from file; "" when
// nothing is.
func resolve(fsys fs.FS, file, target string, anchorsOf func(string) (map[string]bool, error)) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		if strings.HasPrefix(target, ownURL) {
			return ""
		}
		return "points outside the repository (only " + ownURL + "... may)"
	}
	p, anchor, _ := strings.Cut(target, "#")
	dest := file
	if p != "" {
		if path.IsAbs(p) {
			return "an absolute path; link relative to the file"
		}
		dest = path.Join(path.Dir(file), p)
		if dest == ".." || strings.HasPrefix(dest, "../") {
			return "leaves the repository"
		}
		if _, err := fs.Stat(fsys, dest); err != nil {
			return "no such file or directory (" + dest + ")"
		}
	}
	if anchor == "" || !strings.HasSuffix(dest, ".md") {
		return ""
	}
	a, err := anchorsOf(dest)
	if err != nil {
		return fmt.Sprintf("read %s: %v", dest, err)
	}
	if !a[anchor] {
		return "no heading of " + dest + " makes the anchor #" + anchor
	}
	return ""
}

// headingAnchors are the anchors GitHub makes of a text's headings:
// lower case, punctuation dropped, spaces to hyphens, a repeated one
// suffixed -1, -2...
func headingAnchors(text string) map[string]bool {
	out := map[string]bool{}
	count := map[string]int{}
	fence := ""
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		slug := slugify(title)
		if n := count[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		count[slug]++
	}
	return out
}

func slugify(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
