package capi

import (
	"bytes"
	"fmt"
	"strings"
	"unsafe"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/region"
)

// Tag search (PDC_Client_query_kvtag) and the DART index
// (PDC_Client_*_obj_ref_*_dart). PDC's functions take no connection: they
// use the oldest open one, as PDCcont_get_info does.

// DART's hash algorithms (dart_hash_algo_t) and reference types
// (dart_object_ref_type_t). pdc's index has one layout, DART's with suffix
// trees, so every valid algorithm and reference type gives the same
// answers; they are checked, not used.
const (
	DHTFullHash    = 1 // DHT_FULL_HASH
	DHTInitialHash = 2 // DHT_INITIAL_HASH
	DARTHash       = 3 // DART_HASH

	RefPrimaryID   = 1 // REF_PRIMARY_ID
	RefSecondaryID = 2 // REF_SECONDARY_ID
	RefServerID    = 3 // REF_SERVER_ID
)

// searchConn returns the oldest open connection: PDC's search functions
// name none.
func (l *Lib) searchConn() (*conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var p *conn
	var oldest uint64
	for id, h := range l.mu.handles {
		if h.kind == kindConn && (p == nil || id < oldest) {
			p, oldest = h.conn, id
		}
	}
	if p == nil {
		return nil, fmt.Errorf("no open connection to search through: call PDCinit first: %w", pdc.ErrNotFound)
	}
	return p, nil
}

// KVTagQuery is the query language's form of a pdc_kvtag_t: NAME=VALUE,
// or NAME alone for a NULL value. The name and a text value (PDC_STRING,
// PDC_CHAR of more than one byte, PDC_VOID_PTR) may begin and end with *
// (prefix*, *suffix, *infix*); a numeric value (integers of 1, 2, 4 or 8
// bytes, floats of 4 or 8, by typ) matches numeric tags equal to it.
func KVTagQuery(name string, typ int, value []byte, hasValue bool) (string, error) {
	if name == "" {
		return "", fmt.Errorf("the tag name is empty (NULL): want a name or a pattern such as ab*: %w", pdc.ErrInvalid)
	}
	if strings.ContainsAny(name, "=\x00") {
		return "", fmt.Errorf("tag name %q: a name with = cannot be searched: %w", name, pdc.ErrInvalid)
	}
	if !hasValue {
		return name, nil
	}
	if !region.Type(typ).Valid() {
		return "", fmt.Errorf("unknown pdc_var_type_t %d: want PDC_INT (0) to PDC_SIZE_T (%d): %w", typ, int(region.SizeT), pdc.ErrInvalid)
	}
	text, numeric := client.TagValueText(region.Type(typ), value)
	if numeric {
		return name + "=" + text, nil
	}
	if text == "" {
		return "", fmt.Errorf("tag %q: the value is empty: pass a NULL value to match any value: %w", name, pdc.ErrInvalid)
	}
	if strings.Contains(text, "..") && !strings.Contains(text, "*") {
		return "", fmt.Errorf("tag %q: value %q: text with .. reads as a range of numbers; match it with a * pattern: %w", name, text, pdc.ErrInvalid)
	}
	return name + "=" + text, nil
}

// QueryKVTag is PDC_Client_query_kvtag: the ids of the objects with a tag
// matching the query (see KVTagQuery), sorted. value points to size bytes
// the caller owns (nil: any value); size is checked against the tag value
// limit before they are copied, so a wrong size fails instead of reading
// past the caller's buffer. It reads the tags themselves (every metadata
// server scans its own), so it finds every tagged object whatever was done
// to the DART index.
func (l *Lib) QueryKVTag(name string, typ int, value unsafe.Pointer, size uint64) ([]uint64, int) {
	var ids []uint64
	call := fmt.Sprintf("PDC_Client_query_kvtag(%q, %s, %d bytes)", name, typeName(typ), size)
	rc := l.run(call, func() error {
		if size > maxTagValue {
			return fmt.Errorf("a tag value of %d bytes is over the limit of %d, so no tag could match (is kvtag->size right?): %w", size, maxTagValue, pdc.ErrTooLarge)
		}
		var v []byte
		if value != nil {
			v = bytes.Clone(unsafe.Slice((*byte)(value), size))
		}
		q, err := KVTagQuery(name, typ, v, value != nil)
		if err != nil {
			return err
		}
		ids, err = l.search(q, client.ScanOnly())
		return err
	})
	return ids, rc
}

// QueryTags is pdc_query_tags: the objects with a tag matching q in the
// language of `pdc query` (client.Query: KEY, KEY=VALUE, patterns and
// KEY=LO..HI ranges), asked through the connection pdcID, sorted by id,
// with their names if names is set. Unlike PDC_Client_query_kvtag it
// names its connection and lets the client pick the index or a scan, as
// `pdc query` does.
func (l *Lib) QueryTags(pdcID uint64, q string, names bool) ([]client.Match, int) {
	var ms []client.Match
	rc := l.run(fmt.Sprintf("pdc_query_tags(pdc %d, %q)", pdcID, q), func() error {
		if q == "" {
			return fmt.Errorf("the query is empty (NULL): want KEY, KEY=VALUE, ab*=12* or n=10..20: %w", pdc.ErrInvalid)
		}
		h, err := l.get(pdcID, kindConn)
		if err != nil {
			return err
		}
		var opts []client.QueryOption
		if names {
			opts = append(opts, client.WithNames())
		}
		ctx, cancel := h.conn.ctx()
		defer cancel()
		ms, err = h.conn.c.Query(ctx, q, opts...)
		return err
	})
	return ms, rc
}

func (l *Lib) search(q string, opts ...client.QueryOption) ([]uint64, error) {
	p, err := l.searchConn()
	if err != nil {
		return nil, err
	}
	ctx, cancel := p.ctx()
	defer cancel()
	ms, err := p.c.Query(ctx, q, opts...)
	if err != nil {
		return nil, err
	}
	ids := make([]uint64, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ids, nil
}

func typeName(typ int) string { return fmt.Sprintf("pdc_var_type_t %d", typ) }

func checkDART(algo, ref int) error {
	if algo < DHTFullHash || algo > DARTHash {
		return fmt.Errorf("unknown dart_hash_algo_t %d: want DHT_FULL_HASH (1), DHT_INITIAL_HASH (2) or DART_HASH (3): %w", algo, pdc.ErrInvalid)
	}
	if ref < RefPrimaryID || ref > RefServerID {
		return fmt.Errorf("unknown dart_object_ref_type_t %d: want REF_PRIMARY_ID (1), REF_SECONDARY_ID (2) or REF_SERVER_ID (3): %w", ref, pdc.ErrInvalid)
	}
	return nil
}

// DARTInsert is PDC_Client_insert_obj_ref_into_dart: queries through the
// index then find id by key and the text value. It is idempotent.
func (l *Lib) DARTInsert(algo int, key, value string, ref int, id uint64) int {
	return l.run(fmt.Sprintf("PDC_Client_insert_obj_ref_into_dart(%d, %q, %q, %d, %d)", algo, key, value, ref, id),
		func() error { return l.dartRef(algo, key, value, ref, id, false) })
}

// DARTDelete is PDC_Client_delete_obj_ref_from_dart: it removes what
// DARTInsert added, every suffix entry with it, so that no query through
// the index finds id by key and value any more (other entries of id stay).
func (l *Lib) DARTDelete(algo int, key, value string, ref int, id uint64) int {
	return l.run(fmt.Sprintf("PDC_Client_delete_obj_ref_from_dart(%d, %q, %q, %d, %d)", algo, key, value, ref, id),
		func() error { return l.dartRef(algo, key, value, ref, id, true) })
}

func (l *Lib) dartRef(algo int, key, value string, ref int, id uint64, del bool) error {
	if err := checkDART(algo, ref); err != nil {
		return err
	}
	if strings.ContainsAny(key, "=*") {
		return fmt.Errorf("key %q: a key with = or * could never be searched: %w", key, pdc.ErrInvalid)
	}
	if strings.Contains(value, "*") {
		return fmt.Errorf("value %q: a value with * could never be searched: %w", value, pdc.ErrInvalid)
	}
	p, err := l.searchConn()
	if err != nil {
		return err
	}
	ctx, cancel := p.ctx()
	defer cancel()
	if del {
		return p.c.IndexDelete(ctx, key, value, id)
	}
	return p.c.IndexInsert(ctx, key, value, id)
}

// DARTSearch is PDC_Client_search_obj_ref_through_dart: the ids the index
// holds for query, sorted: key=value with either side exact, prefix*,
// *suffix or *infix* (abcd=1234, ab*=12*, *cd=*34, *bc*=*23*). It finds
// what DARTInsert added and the tags objects were given (the servers index
// them), and fails if the servers keep no index.
func (l *Lib) DARTSearch(algo int, query string, ref int) ([]uint64, int) {
	var ids []uint64
	rc := l.run(fmt.Sprintf("PDC_Client_search_obj_ref_through_dart(%d, %q, %d)", algo, query, ref), func() error {
		if err := checkDART(algo, ref); err != nil {
			return err
		}
		if !strings.Contains(query, "=") {
			return fmt.Errorf("query %q: want key=value (each side exact, prefix*, *suffix or *infix*): %w", query, pdc.ErrInvalid)
		}
		var err error
		ids, err = l.search(query, client.IndexOnly())
		return err
	})
	return ids, rc
}
