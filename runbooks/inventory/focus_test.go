package inventory

import "testing"

func TestFocusKeepsControllersAndOneWorker(t *testing.T) {
	c := Cluster{Name: "c",
		Controllers: []Node{{Name: "cp-1"}, {Name: "cp-2"}},
		Workers:     []Node{{Name: "w-1"}, {Name: "w-2"}, {Name: "w-3"}}}
	f := c.Focus("w-2")
	if len(f.Controllers) != 2 || len(f.Workers) != 1 || f.Workers[0].Name != "w-2" || f.Name != "c" {
		t.Errorf("Focus(w-2) = %+v", f)
	}
	if len(c.Workers) != 3 {
		t.Errorf("Focus changed the cluster: %+v", c)
	}
	if f := c.Focus("cp-1"); len(f.Workers) != 0 || len(f.Controllers) != 2 {
		t.Errorf("Focus(cp-1) = %+v", f)
	}
}
