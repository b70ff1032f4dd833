module github.com/pdcgo/pdc

go 1.26.0

require (
	go.uber.org/goleak v1.3.0
	google.golang.org/protobuf v1.36.12
)

require golang.org/x/sys v0.49.0 // indirect
