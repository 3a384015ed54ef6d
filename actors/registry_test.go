package actors

import (
	"log/slog"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// TestRegistryNarrowed checks that the process registry has
// registryBuckets buckets after narrowRegistry, that the PIDs the actor
// system registered when it was made are still found, and that an actor
// spawned after it is reached by a request.
func TestRegistryNarrowed(t *testing.T) {
	system := quietActorSystem()
	defer system.Shutdown()
	created := goroutinesCreated()
	narrowRegistry(system)
	// a goroutine per map would leave 32,768 descriptors behind for good
	if n := goroutinesCreated() - created; n > 100 {
		t.Errorf("narrowing the registry started %d goroutines", n)
	}
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

// goroutinesCreated is how many goroutines the program started so far.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// quietActorSystem makes an actor system that logs nothing, for tests of
// actors outside the engine.
func quietActorSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
}
