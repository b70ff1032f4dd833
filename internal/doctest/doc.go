// Package doctest runs the code blocks of README.md and docs/*.md, so that
// a command the documentation shows cannot fail for a reader without
// failing a test. internal/e2e/readme runs the blocks against the pdc
// binary under test; capi/readme_test.go runs those that need libpdc
// against the libpdc its C tests install.
//
// Which blocks run, and how, is said by an HTML comment on the line just
// before a block's opening fence (GitHub does not render it):
//
//	<!-- pdc:run -->          run it (sh: bash -euo pipefail; go: build
//	                          against this module and run the program)
//	<!-- pdc:run cluster -->  run it in a new session that has a 2-server
//	                          cluster (pdc up -n 2) running
//	<!-- pdc:run new -->      run it in a new session with no cluster (the
//	                          block starts its own)
//	<!-- pdc:run capi -->     run it with libpdc installed at
//	                          ./build/capi, as make capi installs it, and
//	                          ./build/capi/bin on PATH: capi's tests run
//	                          every block of a session that has one
//	<!-- pdc:run needs=mpiexec -->
//	                          the session needs these programs: skip it
//	                          where they are missing (fail with
//	                          PDC_LAUNCHERS_REQUIRED=1, as in CI)
//	<!-- pdc:file NAME -->    write the block to ./NAME for the blocks that
//	                          follow (a C program that a shell block
//	                          builds); takes the words pdc:run takes
//	<!-- pdc:skip REASON -->  do not run it, because REASON; say why in the
//	                          text the reader sees too
//	<!-- launch: NAME -->     run by capi/launch_test.go under a launcher
//
// Every sh, bash, go and c block must carry one of these; a block without
// one fails the test, so that a new block is run or says why not.
//
// A session is a fresh directory with PDC_TMPDIR=./pdc_tmp and
// PDC_DATA_LOC=./pdc_data (pdc's defaults), ./pdc and ./bin/pdc the binary
// under test, ./bin first on PATH. The blocks of a file run in order, each
// in its own bash, in the session the last new or cluster block began, as
// a reader following the text would run them: files and servers carry
// over from block to block, exported variables and background jobs do not
// (a block's process group is killed when it ends). When a session ends,
// its cluster is stopped.
package doctest
