// Command pdc runs pdc servers, local clusters, client commands and
// benchmarks. See `pdc help`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/pdcgo/pdc/internal/cli"
)

func main() {
	cli.ServerRuntime(os.Args[1:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "pdc:", err)
		os.Exit(cli.ExitCode(err))
	}
}
