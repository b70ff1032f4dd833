package main

// main does nothing: c-shared needs a main package, and the library's
// work starts when C calls an export. Without cgo the package is this
// alone, so go build ./... still builds everywhere.
func main() {}
