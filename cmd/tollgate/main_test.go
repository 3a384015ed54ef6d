package main

import (
	"os"
	"testing"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// TestMain removes the tollgate binary the integration tests built.
func TestMain(m *testing.M) { os.Exit(servertest.Main(m)) }
