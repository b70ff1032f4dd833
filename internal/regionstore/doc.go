// Package regionstore keeps a data server's share of objects on disk, by
// file offset (the canonical row-major layout of fixed-dims objects) or by
// region (an append log of written regions and a persistent index of
// them). Its pure core resolves a read against the regions stored so far:
// the last completed write wins for every element, and elements never
// written read as zeros.
package regionstore
