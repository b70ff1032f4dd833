//go:build ignore

// gen.go writes messages_gen.go and calls_gen.go from the table
// messages.wire:
//
//	go generate ./internal/wire
//
// (see internal/wire/internal/gen for the table's syntax).
package main

import (
	"fmt"
	"os"

	"github.com/pdcgo/pdc/internal/wire/internal/gen"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run() error {
	src, err := os.ReadFile("messages.wire")
	if err != nil {
		return err
	}
	s, err := gen.Parse(src)
	if err != nil {
		return fmt.Errorf("messages.wire: %w", err)
	}
	out, err := gen.Generate(s, "messages.wire")
	if err != nil {
		return err
	}
	if err := os.WriteFile("messages_gen.go", out, 0o644); err != nil {
		return err
	}
	if out, err = gen.GenerateCalls(s, "messages.wire"); err != nil {
		return err
	}
	return os.WriteFile("calls_gen.go", out, 0o644)
}
