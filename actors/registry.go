package actors

import (
	"github.com/asynkron/protoactor-go/actor"
	cmap "github.com/orcaman/concurrent-map"
)

// registryBuckets is how many buckets the process registry has: each
// holds 32 maps of PIDs. protoactor makes 1,024 (32,768 maps): each map
// gets its first 8 slots (288 bytes) when a PID first lands in it and
// keeps them for good, so a wave of budget actors leaves 9.5 MB behind,
// spread over the heap's pages between the wave's own objects.
const registryBuckets = 64

// narrowRegistry gives system's process registry registryBuckets buckets,
// with the PIDs it holds. It runs before anything is spawned or sent:
// protoactor reads the registry's buckets without a lock, and
// NewActorSystem starts no goroutine that touches them.
func narrowRegistry(system *actor.ActorSystem) {
	old := system.ProcessRegistry.LocalPIDs
	narrow := &actor.SliceMap{LocalPIDs: make([]cmap.ConcurrentMap, registryBuckets)}
	for i := range narrow.LocalPIDs {
		narrow.LocalPIDs[i] = cmap.New()
	}
	for _, m := range old.LocalPIDs {
		// IterCb reads the shards in turn; IterBuffered and Items would
		// start a goroutine per shard, and the runtime keeps goroutine
		// descriptors for good (the idle server measured 8 MiB larger)
		m.IterCb(func(key string, v any) { narrow.GetBucket(key).Set(key, v) })
	}
	system.ProcessRegistry.LocalPIDs = narrow
}
