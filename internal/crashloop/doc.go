// Package crashloop is pdc's crash-loop harness: real `pdc server`
// processes and several client processes doing mixed work (creates, tag
// puts and deletes, region writes and overwrites in every partition and
// storage mode, set dims that grow and shrink objects, object deletes and
// creates again of the same name, tag reads and tag searches),
// random kill -9 of servers and of clients mid-operation, restarts, and a
// check of every acknowledged operation against a history model with
// github.com/anishathalye/porcupine.
//
// The parts:
//
//   - The op log (oplog.go): each client process appends one line per
//     invocation and one per outcome of each operation, with the values
//     written or read, to a file of its own, one write(2) per line, so
//     that what it logged survives its own kill -9. Times are
//     CLOCK_MONOTONIC, which every process on the host shares.
//   - The worker (worker.go): the body of a client process. It runs until
//     it is killed.
//   - The driver (loop.go): per cycle it starts the cluster (`pdc up`),
//     starts the workers, kills a worker and a server at random moments,
//     kills what is left (or stops the cluster cleanly), restarts it, and
//     reads back, as one more logged process, every object touched in the
//     cycle and a sample of the others: existence, tags, and every cell;
//     then it searches for every tag and for some of the values read.
//   - The checker (check.go): a register per object name (which
//     incarnation of it exists: an id is never reused, so a delete and a
//     create make another, with no tags, its first dims and zeros), and per
//     incarnation a register per tag, one for its dims, and one per
//     cell. A set dims (of any dim) cuts the cells outside the new dims
//     (they read as zeros once it grows back, see RegrowReadsZeros); a
//     delete ends the incarnation: no operation through a handle to it
//     succeeds after it, and nothing of it shows in the next. Elements
//     keep their coordinates when the dims change, so a cell is named by
//     its coordinates (its index in spanDims), whatever the dims. Writes
//     acknowledged take effect between invocation and acknowledgement;
//     writes not acknowledged (the client was killed, or the write
//     failed) may take effect at any moment after their invocation until
//     every server of their cycle is dead, or never. A read must return a value some
//     linearization allows: never zeros after an acknowledged write, never
//     an older value than the last acknowledged one, never an error.
//     A tag search (search.go, searchcheck.go) is a read, per
//     incarnation and tag it may have seen, of whether the value
//     matched; objects with no operation in the cycle hold what was read
//     back, and searches are checked against that directly.
//     Because the cycle's read-back follows every write of the cycle (all
//     clients and servers are dead by then), it pins each register, and
//     each cycle is checked on its own from the values read back before.
//
// Each cell holds a value that names the write (a write id) and the cell,
// so a value from another cell or from no write at all is caught as
// corrupt without the model.
//
// The test (TestCrashLoop) runs a bounded loop in CI; `pdc bench soak`
// runs the same loop for as many cycles as asked.
package crashloop
