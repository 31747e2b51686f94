package osstate

import "testing"

func TestCompareVersionsAsDpkg(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"1.0", "1.0", 0},
		{"1.0", "1.1", -1},
		{"1.10", "1.9", 1},
		{"1:1.0", "2.0", 1},
		{"1.0~rc1", "1.0", -1},
		{"7.88.1-10+deb12u5", "7.88.1-10+deb12u4", 1},
		{"3.0.11-1~deb12u2", "3.0.11-1", -1},
		{"6.1.90-1", "6.1.76-1", 1},
		{"1:9.2p1-2+deb12u3", "1:9.2p1-2+deb12u2", 1},
		{"1.0a", "1.0", 1},
	} {
		got := CompareVersions(c.a, c.b)
		if got > 0 {
			got = 1
		} else if got < 0 {
			got = -1
		}
		if got != c.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestDpkgStatusRoundTrips(t *testing.T) {
	pkgs := []Package{{Name: "curl", Version: "7.88.1-10+deb12u5"}, {Name: "linux-image-amd64", Version: "6.1.76-1", Depends: []string{"linux-image-6.1.0-18-amd64"}, Held: true}}
	path := t.TempDir() + "/status"
	if err := WriteFile(path, FormatDpkgStatus(pkgs)); err != nil {
		t.Fatal(err)
	}
	got, err := ReadDpkgStatus(path)
	if err != nil || len(got) != 2 || got[1].Name != "linux-image-amd64" || !got[1].Held || got[1].Depends[0] != "linux-image-6.1.0-18-amd64" || got[0].Held {
		t.Fatalf("%+v %v", got, err)
	}
	if k := NewestKernel(append(got, Package{Name: "linux-image-6.1.0-21-amd64", Version: "6.1.90-1"}, Package{Name: "linux-image-6.1.0-18-amd64", Version: "6.1.76-1"})); k != "6.1.0-21-amd64" {
		t.Errorf("newest kernel %q", k)
	}
}
