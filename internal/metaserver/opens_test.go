package metaserver

import (
	"math/rand/v2"
	"testing"
)

// TestOpenTableMatchesModel runs random opens, closes, deletes and session
// ends against the table and a map of counts, and compares what openIn
// reports after each step.
func TestOpenTableMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sessions := []string{"a", "b", "c"}
	contOf := func(obj uint64) uint64 { return obj % 2 }
	var tab openTable
	tab.init()
	model := map[uint64]map[string]int{} // obj -> session -> opens
	for step := range 20000 {
		obj := uint64(rng.IntN(6))
		session := sessions[rng.IntN(len(sessions))]
		switch op := rng.IntN(10); {
		case op < 5:
			tab.open(session, obj, contOf(obj))
			if model[obj] == nil {
				model[obj] = map[string]int{}
			}
			model[obj][session]++
		case op < 8:
			tab.close(session, obj)
			if model[obj][session] > 0 {
				model[obj][session]--
				if model[obj][session] == 0 {
					delete(model[obj], session)
				}
			}
		case op < 9:
			tab.endSession(session)
			for _, m := range model {
				delete(m, session)
			}
		default:
			tab.forget(obj)
			delete(model, obj)
		}
		for cont := range uint64(2) {
			want := 0
			for o, m := range model {
				if contOf(o) == cont && len(m) > 0 {
					want++
				}
			}
			if got, _ := tab.openIn(cont); got != want {
				t.Fatalf("step %d: %d objects open in container %d; want %d (model %v)", step, got, cont, want, model)
			}
		}
		for _, s := range sessions {
			want := 0
			for _, m := range model {
				if m[s] > 0 {
					want++
				}
			}
			if got := len(tab.bySession[s]); got != want {
				t.Fatalf("step %d: session %s holds %d objects; want %d", step, s, got, want)
			}
		}
	}
}
