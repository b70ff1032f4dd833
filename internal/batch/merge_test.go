package batch

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/pdcgo/pdc"
)

// pages serves names from a sorted list a page of size at a time, as a
// server pages by name.
func pages(names []string, size int) func(ctx context.Context, rank int, after string, limit uint32) ([]string, string, error) {
	return func(_ context.Context, _ int, after string, _ uint32) ([]string, string, error) {
		i, _ := slices.BinarySearch(names, after)
		if i < len(names) && names[i] == after {
			i++
		}
		end := min(i+size, len(names))
		next := ""
		if end < len(names) {
			next = names[end-1]
		}
		return names[i:end], next, nil
	}
}

// Three servers' pages, of different sizes, come out as one sorted list,
// each name once.
func TestMergeByName(t *testing.T) {
	parts := [][]string{{"a", "d", "g", "h"}, {"b", "c"}, {}, {"e", "f", "i", "j", "k"}}
	m := NewMerge(strings.Compare)
	for i, p := range parts {
		m.AddByName([]int{i}, func(int) string { return "server" }, 2, "list", "page", pages(p, i+1))
	}
	var got []string
	for v, err := range m.All(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	if want := "a b c d e f g h i j k"; strings.Join(got, " ") != want {
		t.Fatalf("merged %v, want %s", got, want)
	}
}

// A server whose page does not move past the last name would loop the
// walk forever: it is a protocol error, which every later Next returns.
func TestMergeByNameRefusesAPageThatDoesNotMove(t *testing.T) {
	m := NewMerge(strings.Compare)
	stuck := func(context.Context, int, string, uint32) ([]string, string, error) { return []string{"x"}, "a", nil }
	m.AddByName([]int{3}, func(r int) string { return "rank 3" }, 0, "list names", "name_page", stuck)
	ctx := context.Background()
	var err error
	for range 3 {
		if _, _, err = m.Next(ctx); err != nil {
			break
		}
	}
	if !errors.Is(err, pdc.ErrProtocol) || !strings.Contains(err.Error(), "rank 3: name_page: the page after") {
		t.Fatalf("a page ending where it began: %v, want a protocol error naming the server", err)
	}
	if _, _, again := m.Next(ctx); again != err {
		t.Fatalf("Next after the error: %v, want the same error", again)
	}
}

// ByOwner groups distinct ids by owner, first occurrence kept, and
// refuses id 0; Requests counts the requests InChunks makes.
func TestByOwner(t *testing.T) {
	ids := []uint64{5, 2, 5, 7, 4}
	g, err := ByOwner(ids, func(id uint64) (int, error) { return int(id % 2), nil })
	if err != nil || !slices.Equal(g[1], []int{0, 3}) || !slices.Equal(g[0], []int{1, 4}) || len(g) != 2 {
		t.Fatalf("ByOwner: %v, %v", g, err)
	}
	if n := Requests(g); n != 2 {
		t.Fatalf("Requests: %d, want 2", n)
	}
	if n := Requests(map[int][]int{0: make([]int, MaxItems+1)}); n != 2 {
		t.Fatalf("Requests of MaxItems+1 items: %d, want 2", n)
	}
	if _, err := ByOwner([]uint64{1, 0}, func(uint64) (int, error) { return 0, nil }); !errors.Is(err, pdc.ErrInvalid) {
		t.Fatalf("ByOwner with id 0: %v, want ErrInvalid", err)
	}
}
