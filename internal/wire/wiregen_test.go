package wire_test

import (
	"bytes"
	"os"
	"slices"
	"testing"

	"github.com/pdcgo/pdc/internal/wire/internal/gen"
)

// TestGeneratedCodeIsCurrent regenerates messages_gen.go from
// messages.wire in memory: a table edited without go generate, or a
// generated file edited by hand, fails here.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	s := parseTable(t)
	want, err := gen.Generate(s, "messages.wire")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("messages_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		line := 1
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				break
			}
			if got[i] == '\n' {
				line++
			}
		}
		t.Fatalf("messages_gen.go is not what messages.wire generates (first difference on line %d): run go generate ./internal/wire", line)
	}
}

// TestGoldenCoversTable: every message of the table has a golden encoding
// (wiregolden_test.go), so none can change its bytes unnoticed.
func TestGoldenCoversTable(t *testing.T) {
	var golden []string
	for _, g := range goldenMessages() {
		golden = append(golden, g.name)
	}
	for _, name := range parseTable(t).Names() {
		if !slices.Contains(golden, name) {
			t.Errorf("message %s of messages.wire has no golden value in wiregolden_test.go", name)
		}
	}
}

func parseTable(t *testing.T) *gen.Schema {
	t.Helper()
	src, err := os.ReadFile("messages.wire")
	if err != nil {
		t.Fatal(err)
	}
	s, err := gen.Parse(src)
	if err != nil {
		t.Fatalf("messages.wire: %v", err)
	}
	return s
}
