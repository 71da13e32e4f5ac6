package escape_test

import (
	"os"
	"testing"

	"github.com/sandplane/sandplane/internal/testdaemon"
)

func TestMain(m *testing.M) { os.Exit(testdaemon.Main(m)) }
