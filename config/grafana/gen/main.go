// Command gen writes the dashboard JSON. Run it from config/grafana (go
// generate does).
package main

import (
	"fmt"
	"os"

	"github.com/unitlet/unitlet/config/grafana"
)

func main() {
	out, err := grafana.JSON()
	if err == nil {
		err = os.WriteFile(grafana.File, out, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
