package wire

// Messages of a cluster's start that move data slots (see
// docs/design/0013-data-slots.md): every server reports what its data dir
// holds to rank 0 (StartRound rounds), which answers each with its part
// of the plan; slots then go from server to server as files (SlotFile,
// SlotCommit).

// Start rounds (StartRound.Round).
const (
	// RoundInventory: the request carries the server's Inventory; the
	// answer's Plan says which metadata stores it adopts.
	RoundInventory = 1
	// RoundPlan: the answer's Plan is the server's part of the data move.
	RoundPlan = 2
	// RoundMoved: answered once every server has sent its slots.
	RoundMoved = 3
	// RoundOpened: answered once every server holds its slots, and rank
	// 0 has recorded them.
	RoundOpened = 4
)
