package servertest

import (
	"os"
	"testing"
)

// TestRemoveBinary: the binary built for a test run is gone after
// RemoveBinary, with its temp directory.
func TestRemoveBinary(t *testing.T) {
	path := Binary(t)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("built binary missing: %v", err)
	}
	if err := RemoveBinary(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("binary still there after RemoveBinary: %v", err)
	}
	if err := RemoveBinary(); err != nil {
		t.Fatalf("second RemoveBinary: %v", err)
	}
}
