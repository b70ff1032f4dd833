package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkPreload stages one file from node-a to node-b per iteration,
// through pdc stage and through libpdc_preload.so (bench preload's pair),
// against real servers. It needs make capi's install: $PDC_CAPI_PREFIX,
// else build/capi in the source tree.
func BenchmarkPreload(b *testing.B) {
	prefix, err := findPreload("", os.Getenv("PDC_CAPI_PREFIX"), "")
	if err != nil {
		if prefix, err = findPreload(filepath.Join("..", "..", "build", "capi"), "", ""); err != nil {
			b.Skipf("no libpdc install (make capi, or set PDC_CAPI_PREFIX): %v", err)
		}
	}
	ctx := context.Background()
	p, stop, err := startPreloadBench(ctx, prefix, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	for _, size := range []int64{1 << 10, 1 << 20} {
		src := filepath.Join(p.dir, sizeLabel(size)+".src")
		if err := writeRandom(src, size); err != nil {
			b.Fatal(err)
		}
		for _, via := range []string{viaStage, viaPreload} {
			b.Run(sizeLabel(size)+"/"+via, func(b *testing.B) {
				b.SetBytes(size)
				for range b.N {
					if _, _, err := p.pair(ctx, via, src); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
