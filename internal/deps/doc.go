// Package deps holds the repository's import rules, and its test fails
// when a package imports across them. The rules are the layering of
// docs/ARCHITECTURE.md written as data: dependencies point inward, from
// the command line and the C ABI through the public client to the wire,
// and from the server's composition root through the services to the
// stores and the pure packages. A rule is never waived for one import: a
// crossing is moved, or the rule is changed here with the reason.
//
// Only non-test imports are checked. Tests may reach across layers to
// build what they exercise.
package deps
