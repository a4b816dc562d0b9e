package status_test

import (
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/metrics/status"
)

func TestClusterWarnsOnDifferentVersionsAndConfigs(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	r := func(id, version, config string, stopped bool) core.Replica {
		x := core.Replica{ID: id, Host: "h-" + id, Version: version, ConfigHash: config, Started: now.Add(-time.Hour), Heartbeat: now}
		if stopped {
			x.Stopped = now.Add(-time.Minute)
		}
		return x
	}
	leases := []core.LeaseInfo{{Name: "scheduler", Holder: "a", Epoch: 3, Expires: now.Add(5 * time.Second)}, {Name: "maintenance", Holder: "b", Epoch: 1, Expires: now.Add(-time.Second)}}
	for _, tc := range []struct {
		name     string
		replicas []core.Replica
		want     []string
	}{
		{"alike", []core.Replica{r("a", "1.4.0", "c1", false), r("b", "1.4.0", "c1", false)}, nil},
		{"versions", []core.Replica{r("a", "1.4.0", "c1", false), r("b", "1.5.0", "c1", false)}, []string{"different versions: 1.4.0 on a; 1.5.0 on b"}},
		{"configs", []core.Replica{r("a", "1.4.0", "c1", false), r("b", "1.4.0", "c2", false), r("c", "1.4.0", "c2", false)}, []string{"different configs: c1 on a; c2 on b, c"}},
		{"a stopped old version does not count", []core.Replica{r("a", "1.4.0", "c1", true), r("b", "1.5.0", "c1", false)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := status.ClusterOf("a", tc.replicas, leases, now)
			if len(c.Warnings) != len(tc.want) {
				t.Fatalf("warnings %q; want %q", c.Warnings, tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(c.Warnings[i], w) {
					t.Errorf("warning %q; want it to say %q", c.Warnings[i], w)
				}
			}
			if len(c.Leases) != 2 || !c.Leases[0].Held || c.Leases[1].Held || c.Replica != "a" || len(c.Replicas) != len(tc.replicas) {
				t.Fatalf("cluster %+v", c)
			}
		})
	}
}
