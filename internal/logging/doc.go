// Package logging makes pdc's loggers: log/slog in text or JSON, every
// record of a context that carries an operation's trace id (rpc.TraceOf)
// tagged with it, and File, a log file that rotates by size, for servers
// that pdc up starts in the background (docs/design/0031).
package logging
