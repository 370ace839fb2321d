// Package report is the escape probe's report: the rows it writes and
// the tests read (no dependencies, so a runtime package's test can read
// it too).
package report

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// Row is one line of the escape matrix: what a tenant's process tried,
// what it got, and whether that reached past its own world.
type Row struct {
	Name    string `json:"name"`
	Tried   string `json:"tried"`
	Got     string `json:"got"`
	Escaped bool   `json:"escaped"`
}

// Rows is the number of rows every report has (more with the metadata
// row).
const Rows = 13

// Parse reads a report.
func Parse(b []byte) ([]Row, error) {
	var rows []Row
	if err := json.Unmarshal(b, &rows); err != nil {
		return nil, fmt.Errorf("escape report: %w", err)
	}
	return rows, nil
}

// Read waits up to limit for the report at path.
func Read(path string, limit time.Duration) ([]Row, error) {
	deadline := time.Now().Add(limit)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			var rows []Row
			if rows, err = Parse(b); err == nil {
				return rows, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no report at %s: %w", path, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Table renders rows as a markdown table.
func Table(rows []Row) string {
	var b strings.Builder
	b.WriteString("| row | tried | got | escaped |\n|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %v |\n", r.Name, r.Tried, r.Got, r.Escaped)
	}
	return b.String()
}

// Escapes are the rows that escaped, one line each.
func Escapes(rows []Row) []string {
	var out []string
	for _, r := range rows {
		if r.Escaped {
			out = append(out, fmt.Sprintf("%s: tried %s, got %s", r.Name, r.Tried, r.Got))
		}
	}
	return out
}
