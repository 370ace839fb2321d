package agent

import (
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// apiBackoff is the wait after each failed API round in a row: 1 s,
// doubling, at most 30 s, for as long as the failures last.
func apiBackoff() wait.Backoff {
	return wait.Backoff{Duration: time.Second, Factor: 2, Cap: 30 * time.Second, Steps: math.MaxInt32}
}
