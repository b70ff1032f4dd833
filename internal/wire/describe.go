package wire

import (
	"log/slog"
	"strconv"
)

// DescribeRegion writes a region as logs show it: each dimension's
// start:end, "[0:64,128:256]".
func DescribeRegion(off, size []uint64) string {
	b := []byte{'['}
	for i := range off {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, off[i], 10)
		b = append(b, ':')
		var n uint64
		if i < len(size) {
			n = size[i]
		}
		b = strconv.AppendUint(b, off[i]+n, 10)
	}
	return string(append(b, ']'))
}

// DescribeDataStart names what a DataStart request is about, for the
// request log (rpc.Describe): its first item's object and region, whether
// it writes, and how many items it has.
func DescribeDataStart(hdr []byte) []slog.Attr {
	var m DataStart
	if m.Unmarshal(hdr) != nil || len(m.Items) == 0 {
		return nil
	}
	it := &m.Items[0]
	op := "read"
	if it.Write {
		op = "write"
	}
	return []slog.Attr{slog.Uint64("object", it.Obj), slog.String("region", DescribeRegion(it.Off, it.Size)),
		slog.String("op", op), slog.Int("items", len(m.Items))}
}

// DescribeRegionBatch names what a RegionBatch request (placement,
// region queries) is about: its first region's object and region and how
// many regions it has.
func DescribeRegionBatch(hdr []byte) []slog.Attr {
	var m RegionBatch
	if m.Unmarshal(hdr) != nil || len(m.Items) == 0 {
		return nil
	}
	it := &m.Items[0]
	return []slog.Attr{slog.Uint64("object", it.Obj), slog.String("region", DescribeRegion(it.Off, it.Size)),
		slog.Int("items", len(m.Items))}
}

// DescribeRegionReq names the object and region of a RegionReq.
func DescribeRegionReq(hdr []byte) []slog.Attr {
	var m RegionReq
	if m.Unmarshal(hdr) != nil {
		return nil
	}
	return []slog.Attr{slog.Uint64("object", m.Obj), slog.String("region", DescribeRegion(m.Off, m.Size))}
}

// DescribeStageKey names the staged file of a StageKey request.
func DescribeStageKey(hdr []byte) []slog.Attr {
	var m StageKey
	if m.Unmarshal(hdr) != nil {
		return nil
	}
	return []slog.Attr{slog.String("path", m.Path), slog.String("namespace", m.Namespace)}
}
