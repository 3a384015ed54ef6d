package actors

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// TestRegistryNarrowed checks that the process registry has
// registryBuckets buckets after narrowRegistry, that the PIDs the actor
// system registered when it was made are still found, and that an actor
// spawned after it is reached by a request.
func TestRegistryNarrowed(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	defer system.Shutdown()
	narrowRegistry(system)
	pids := system.ProcessRegistry.LocalPIDs
	if n := len(pids.LocalPIDs); n != registryBuckets {
		t.Fatalf("registry has %d buckets, want %d", n, registryBuckets)
	}
	for _, id := range []string{"deadletter", "eventstream"} {
		if _, ok := pids.GetBucket(id).Get(id); !ok {
			t.Errorf("%s is not in the narrowed registry", id)
		}
	}
	pid, err := system.Root.SpawnNamed(actor.PropsFromFunc(func(c actor.Context) {
		if s, ok := c.Message().(string); ok {
			c.Respond(s + "!")
		}
	}), "echo")
	if err != nil {
		t.Fatal(err)
	}
	res, err := system.Root.RequestFuture(pid, "hi", 10*time.Second).Result()
	if err != nil || res != "hi!" {
		t.Fatalf("request: %v, %v", res, err)
	}
}
