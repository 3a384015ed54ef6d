package protocol

import "testing"

// TestCronFiringOwnsItsBindings: each firing's job gets its own copy of the
// template's binding list. The engine interns the keys of a job it adds in
// place, and a template's list is read meanwhile by other goroutines (job
// views being written, cron folding): a firing that shared it wrote into
// the template.
func TestCronFiringOwnsItsBindings(t *testing.T) {
	tpl := &CronTemplate{Type: "t", Queue: "q", Budgets: []Binding{{Key: "a", Cost: 1}, {Key: "b", Cost: 2}}}
	nj := tpl.NewJob()
	nj.Job.Budgets[0].Key = "changed"
	if tpl.Budgets[0].Key != "a" {
		t.Fatalf("a firing's job shares the template's bindings: the template now binds %q", tpl.Budgets[0].Key)
	}
	if got := (&CronTemplate{Type: "t", Queue: "q"}).NewJob().Job.Budgets; got != nil {
		t.Fatalf("a template without budgets fires a job bound to %v", got)
	}
}
