package agent

import (
	"fmt"
	"os"
	"testing"

	"github.com/unitlet/unitlet/internal/testkit/testenv"
)

// env is the control plane the package's tests share.
var env *testenv.Env

func TestMain(m *testing.M) {
	var err error
	env, err = testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}
