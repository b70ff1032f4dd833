package cluster

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"strconv"

	"github.com/pdcgo/pdc"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// A framed file is one header line, then a body:
//
//	<magic> v<version> crc32c=<8 hex> len=<decimal>\n<body>
//
// The header keeps the file readable by people while letting readers reject
// other formats, other versions, and torn or edited bodies.

func frameFile(magic string, version int, body []byte) []byte {
	sum := crc32.Checksum(body, castagnoli)
	head := fmt.Sprintf("%s v%d crc32c=%08x len=%d\n", magic, version, sum, len(body))
	return append([]byte(head), body...)
}

func unframeFile(path, magic string, version int, data []byte) ([]byte, error) {
	nl := bytes.IndexByte(data, '\n')
	if nl < 0 {
		return nil, fmt.Errorf("%s: no header line (empty or torn file): %w", path, pdc.ErrProtocol)
	}
	var gotMagic string
	var gotVersion, n int
	var sum uint32
	head := string(data[:nl])
	if _, err := fmt.Sscanf(head, "%s v%d crc32c=%x len=%d", &gotMagic, &gotVersion, &sum, &n); err != nil {
		return nil, fmt.Errorf("%s: bad header %q: %w", path, head, pdc.ErrProtocol)
	}
	if gotMagic != magic {
		return nil, fmt.Errorf("%s: is a %q file, want %q: %w", path, gotMagic, magic, pdc.ErrProtocol)
	}
	if gotVersion != version {
		return nil, fmt.Errorf("%s: format version %d, this build reads version %d: %w", path, gotVersion, version, pdc.ErrVersion)
	}
	body := data[nl+1:]
	if len(body) != n {
		return nil, fmt.Errorf("%s: body is %d bytes, header says %s: %w", path, len(body), strconv.Itoa(n), pdc.ErrChecksum)
	}
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return nil, fmt.Errorf("%s: checksum %08x, header says %08x: %w", path, got, sum, pdc.ErrChecksum)
	}
	return body, nil
}
