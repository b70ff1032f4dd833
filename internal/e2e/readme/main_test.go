package readme_test

import (
	"os"
	"testing"

	"github.com/pdcgo/pdc/internal/e2e"
)

func TestMain(m *testing.M) { os.Exit(e2e.Main(m, nil)) }
