// Package docs runs the command blocks of the quick start and the app
// developer's guide against a dev control plane, as a reader would, so
// the docs cannot rot. This file is the pure part: fenced blocks out of
// markdown, a section's bounds, and the one bash script per file whose
// line numbers are the markdown's, so that bash's own errors and the
// failing command's line read as file:line.
package docs

import (
	"fmt"
	"strconv"
	"strings"
)

// Mode is what the harness does with a block, from its info string.
type Mode int

const (
	// Show blocks (console, text, yaml, nginx, ...) are only shown.
	Show Mode = iota
	// Run blocks (info string "sh") run in the file's bash, in order.
	Run
	// Background blocks ("sh background") start in a process group of
	// their own and are killed when the file is done (e.g. `make run`).
	Background
)

// Block is one fenced code block.
type Block struct {
	// Line is the opening fence's line, 1-based.
	Line int
	Info string
	Mode Mode
	// Body is the content, without the fences, unindented by the
	// opening fence's indentation.
	Body []string
}

// ModeOf reads an info string: its first word "sh" runs, "sh background"
// starts in the background; anything after "sh" else is refused, so a
// typo never turns a command into prose that nothing runs.
func ModeOf(info string) (Mode, error) {
	words := strings.Fields(info)
	if len(words) == 0 || words[0] != "sh" {
		return Show, nil
	}
	switch strings.Join(words[1:], " ") {
	case "":
		return Run, nil
	case "background":
		return Background, nil
	}
	return Show, fmt.Errorf("info string %q: after sh only \"background\" is known", info)
}

// fence is an opening or closing fence line.
type fence struct {
	indent int
	char   byte
	n      int
	info   string
}

// readFence reads line as a fence: any indentation, then three or more
// backticks or tildes; a backtick fence's info string has no backtick.
func readFence(line string) (fence, bool) {
	rest := strings.TrimLeft(line, " ")
	f := fence{indent: len(line) - len(rest)}
	if len(rest) < 3 || (rest[0] != '`' && rest[0] != '~') {
		return fence{}, false
	}
	f.char = rest[0]
	for f.n < len(rest) && rest[f.n] == f.char {
		f.n++
	}
	if f.n < 3 {
		return fence{}, false
	}
	f.info = strings.TrimSpace(rest[f.n:])
	if f.char == '`' && strings.Contains(f.info, "`") {
		return fence{}, false
	}
	return f, true
}

// closes says whether line closes the block opened by open: the same
// character, at least as many, nothing after.
func (open fence) closes(line string) bool {
	f, ok := readFence(line)
	return ok && f.char == open.char && f.n >= open.n && f.info == ""
}

// Parse returns every fenced block of src in order. A fence inside a
// longer one (```` around ```) is content. An unclosed block or an
// unknown sh attribute is an error naming its line.
func Parse(src string) ([]Block, error) {
	lines := strings.Split(src, "\n")
	var blocks []Block
	for i := 0; i < len(lines); i++ {
		open, ok := readFence(lines[i])
		if !ok {
			continue
		}
		mode, err := ModeOf(open.info)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		b := Block{Line: i + 1, Info: open.info, Mode: mode}
		j := i + 1
		for ; j < len(lines) && !open.closes(lines[j]); j++ {
			b.Body = append(b.Body, unindent(lines[j], open.indent))
		}
		if j == len(lines) {
			return nil, fmt.Errorf("line %d: the block opened here is never closed", i+1)
		}
		blocks = append(blocks, b)
		i = j
	}
	return blocks, nil
}

// unindent removes up to n leading spaces, as CommonMark does for the
// content of an indented fence.
func unindent(line string, n int) string {
	for n > 0 && strings.HasPrefix(line, " ") {
		line, n = line[1:], n-1
	}
	return line
}

// Section returns the lines [from, to) of the section under heading (a
// line equal to it, e.g. "## Quick start"), up to the next heading of
// the same level or higher. Lines in fenced blocks (a "# comment" in a
// shell block) are not headings.
func Section(src, heading string) (from, to int, err error) {
	level := headingLevel(heading)
	if level == 0 {
		return 0, 0, fmt.Errorf("%q is not a heading", heading)
	}
	lines := strings.Split(src, "\n")
	inFence, open := false, fence{}
	for i, line := range lines {
		switch {
		case inFence:
			inFence = !open.closes(line)
			continue
		case isFence(line, &open):
			inFence = true
			continue
		}
		if from == 0 && strings.TrimRight(line, " ") == heading {
			from = i + 1
			continue
		}
		if l := headingLevel(line); from != 0 && l > 0 && l <= level {
			return from, i + 1, nil
		}
	}
	if from == 0 {
		return 0, 0, fmt.Errorf("no section %q", heading)
	}
	return from, len(lines) + 1, nil
}

func isFence(line string, f *fence) bool {
	got, ok := readFence(line)
	if ok {
		*f = got
	}
	return ok
}

// headingLevel is the number of leading '#' of an ATX heading, 0 if
// line is none.
func headingLevel(line string) int {
	n := 0
	for n < len(line) && line[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || (n < len(line) && line[n] != ' ') {
		return 0
	}
	return n
}

// Within keeps the blocks whose opening fence is in [from, to).
func Within(blocks []Block, from, to int) []Block {
	var in []Block
	for _, b := range blocks {
		if b.Line >= from && b.Line < to {
			in = append(in, b)
		}
	}
	return in
}

// Marker starts each block's output in the script's output.
const Marker = "##docs-block "

// FailMarker is printed by the ERR trap with the failing line and code.
const FailMarker = "##docs-fail "

// preamble is the script's first line: strict mode, the ERR trap that
// names the failing line, and the helpers the fences become. A
// background block's body is padded with newlines so that its own errors
// name the markdown's lines too.
const preamble = `set -euo pipefail; ` +
	`trap 'printf "\n` + FailMarker + `%d %d\n" "$LINENO" "$?"' ERR; ` +
	`__docs_block() { printf '` + Marker + `%d\n' "$1"; }; ` +
	`__docs_bg() { local body pad; body=$(cat); printf -v pad '%*s' "$1" ''; pad=${pad// /$'\n'}; ` +
	`setsid bash -c "set -euo pipefail;$pad$body" "$0" </dev/null >"$DOCS_BG_DIR/$1.log" 2>&1 & ` +
	`echo $! >>"$DOCS_BG_DIR/pids"; }`

// Script is the bash for one file of n lines: line i of the script is
// line i of the markdown. A run block's fence becomes its marker and its
// body runs as written; a background block's body is fed to __docs_bg
// as a heredoc; every other line is blank.
func Script(n int, blocks []Block) (string, error) {
	out := make([]string, n)
	for _, b := range blocks {
		end := b.Line + len(b.Body) // the closing fence, 0-based
		if end >= n {
			return "", fmt.Errorf("line %d: the block runs past the file's %d lines", b.Line, n)
		}
		copy(out[b.Line:], b.Body)
		switch b.Mode {
		case Run:
			out[b.Line-1] = "__docs_block " + strconv.Itoa(b.Line)
		case Background:
			eof := "__DOCS_EOF_" + strconv.Itoa(b.Line)
			for _, l := range b.Body {
				if strings.TrimSpace(l) == eof {
					return "", fmt.Errorf("line %d: the block holds the line %s", b.Line, eof)
				}
			}
			out[b.Line-1] = fmt.Sprintf("__docs_block %d; __docs_bg %d <<'%s'", b.Line, b.Line, eof)
			out[end] = eof
		default:
			return "", fmt.Errorf("line %d: a %q block is only shown", b.Line, b.Info)
		}
	}
	if out[0] == "" {
		out[0] = preamble
	} else {
		out[0] = preamble + "; " + out[0]
	}
	return strings.Join(out, "\n") + "\n", nil
}
