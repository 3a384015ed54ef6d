package actors

import (
	"time"

	"github.com/tollgate/tollgate/protocol"
)

// Messages of the cron routes (SPEC §8.1.3), sent by the facade to the
// queue actor once every 400 check has passed (cron_validate.go). The
// queue actor makes the 409 and 422 checks, writes, and answers with a
// *protocol.CronGroupView, a *protocol.CronEntry, a *CronGroupsResponse, a
// *DeletedResponse, a *Done or a *protocol.Error.

// CronEntryDef is one validated entry of a request.
type CronEntryDef struct {
	Name       string
	Expression string
	Timezone   string // the entry's own zone ("": none)
	Paused     *bool
	Template   protocol.CronTemplate
	// Job holds the template's bindings with their create_with.
	Job *protocol.NewJob
	// Late is a create_with value error (422), answered in the 422 phase,
	// after the 400s of every entry and the 409.
	Late error
	expr *cronExpr
	zone *time.Location // nil: none of its own
}

// PutCronGroup creates or replaces a group whole (SPEC §8.1.4).
type PutCronGroup struct {
	Group    string
	Paused   *bool
	Timezone string // "": none
	zone     *time.Location
	Entries  []CronEntryDef
}

// PutCronEntry creates or replaces one entry, creating its group if
// missing; with Create an existing entry is a conflict (POST).
type PutCronEntry struct {
	Group  string
	Entry  CronEntryDef
	Create bool
}

// PatchCronGroup changes a group's pause state or zone.
type PatchCronGroup struct {
	Group       string
	Paused      *bool
	TimezoneSet bool
	Timezone    string // "" with TimezoneSet: clear
	zone        *time.Location
}

// PatchCronEntry changes an entry's pause state.
type PatchCronEntry struct {
	Group, Entry string
	Paused       *bool
}

// GetCronGroup asks for one group with its entries.
type GetCronGroup struct{ Group string }

// GetCronEntry asks for one entry.
type GetCronEntry struct{ Group, Entry string }

// ListCronGroups asks for every group name, ascending.
type ListCronGroups struct{}

// DeleteCronGroup deletes a group and its entries.
type DeleteCronGroup struct{ Group string }

// DeleteCronEntry deletes one entry; its group stays.
type DeleteCronEntry struct{ Group, Entry string }

// DeleteCronGroups deletes every group.
type DeleteCronGroups struct{}

// CronGroupsResponse lists group names, ascending.
type CronGroupsResponse struct {
	Crons []string `json:"crons" msgpack:"crons"`
}

// DeletedResponse counts what a delete removed.
type DeletedResponse struct {
	Deleted int `json:"deleted" msgpack:"deleted"`
}

func (*PutCronGroup) isQueueMsg()     {}
func (*PutCronEntry) isQueueMsg()     {}
func (*PatchCronGroup) isQueueMsg()   {}
func (*PatchCronEntry) isQueueMsg()   {}
func (*GetCronGroup) isQueueMsg()     {}
func (*GetCronEntry) isQueueMsg()     {}
func (*ListCronGroups) isQueueMsg()   {}
func (*DeleteCronGroup) isQueueMsg()  {}
func (*DeleteCronEntry) isQueueMsg()  {}
func (*DeleteCronGroups) isQueueMsg() {}
