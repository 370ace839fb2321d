package agent

import (
	"testing"

	"github.com/unitlet/unitlet/internal/testkit/testenv"
)

// env is the control plane the package's tests share.
var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }
