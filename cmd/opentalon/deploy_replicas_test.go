package main

// The example for N replicas on one PostgreSQL in deploy/ (issue 23): the
// config every replica shares loads; the compose file and the Kubernetes
// manifests hand it every variable it names, from the Secret; the
// Deployment's probes are /readyz and /healthz, a PodDisruptionBudget
// bounds voluntary disruptions.

import (
	"bytes"
	"errors"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/opentalon/opentalon/config"
)

const replicasConfig = "../../deploy/config.replicas.yaml"

// configVars are the ${VAR} the replicas' config names, and those it
// needs (no default).
func configVars(t *testing.T) (all, required []string) {
	t.Helper()
	b, err := os.ReadFile(replicasConfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`\$\{([A-Z0-9_]+)(:-[^}]*)?\}`).FindAllStringSubmatch(string(b), -1) {
		all = append(all, m[1])
		if m[2] == "" {
			required = append(required, m[1])
		}
	}
	return all, required
}

func TestDeployReplicasConfigLoads(t *testing.T) {
	all, required := configVars(t)
	env := map[string]string{}
	for _, v := range all {
		env[v] = "value-of-" + strings.ToLower(v) + "-long-enough"
	}
	env["OPENTALON_POSTGRES_DSN"] = "postgres://opentalon:pw@postgres:5432/opentalon"
	cfg, err := config.Load(replicasConfig, config.MapEnv(env))
	if err != nil {
		t.Fatalf("deploy/config.replicas.yaml does not load: %v", err)
	}
	if cfg.State.Driver != config.DriverPostgres || !cfg.Channels.Telegram.Enabled {
		t.Fatalf("driver %q, telegram %v; want postgres and a chat platform", cfg.State.Driver, cfg.Channels.Telegram.Enabled)
	}
	for _, v := range []string{"OPENTALON_POSTGRES_DSN", "TELEGRAM_BOT_TOKEN"} {
		if !slices.Contains(required, v) {
			t.Errorf("the replicas' config does not take %s from the environment", v)
		}
	}
}

// yamlDocs decodes every document of a YAML file.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var out []map[string]any
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, d)
	}
}

// dig walks m by keys (a list index is an int).
func dig(m any, keys ...any) any {
	for _, k := range keys {
		switch v := m.(type) {
		case map[string]any:
			m = v[k.(string)]
		case []any:
			i := k.(int)
			if i >= len(v) {
				return nil
			}
			m = v[i]
		default:
			return nil
		}
	}
	return m
}

func TestDeployComposeHandsEveryVariable(t *testing.T) {
	docs := yamlDocs(t, "../../deploy/compose.yaml")
	env, _ := dig(docs[0], "services", "opentalon", "environment").(map[string]any)
	_, required := configVars(t)
	for _, v := range required {
		if _, ok := env[v]; !ok {
			t.Errorf("compose.yaml does not pass %s, which the config needs", v)
		}
	}
	if dig(docs[0], "services", "postgres") == nil || dig(docs[0], "services", "opentalon", "deploy", "replicas") == nil {
		t.Error("compose.yaml has no postgres service or no replica count")
	}
}

func TestDeployKubernetesManifests(t *testing.T) {
	docs := yamlDocs(t, "../../deploy/kubernetes/opentalon.yaml")
	kinds := map[string]map[string]any{}
	for _, d := range docs {
		kinds[d["kind"].(string)] = d
	}
	dep, pdb := kinds["Deployment"], kinds["PodDisruptionBudget"]
	if dep == nil || pdb == nil {
		t.Fatalf("kinds %v; want a Deployment and a PodDisruptionBudget", kinds)
	}
	if n, _ := dig(dep, "spec", "replicas").(int); n < 2 {
		t.Errorf("the Deployment runs %d replica(s); the example is for several", n)
	}
	c := dig(dep, "spec", "template", "spec", "containers", 0)
	if p := dig(c, "readinessProbe", "httpGet", "path"); p != "/readyz" {
		t.Errorf("readiness probe on %v; want /readyz", p)
	}
	if p := dig(c, "livenessProbe", "httpGet", "path"); p != "/healthz" {
		t.Errorf("liveness probe on %v; want /healthz", p)
	}
	// /healthz answers once run is up, after it waited for PostgreSQL:
	// the start-up probe gives it that long before liveness counts.
	wait := config.Default().State.Postgres.ConnectWait.D()
	if s, ok := dig(yamlDocs(t, replicasConfig)[0], "state", "postgres", "connect_wait").(string); ok {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("config.replicas.yaml: state.postgres.connect_wait %q: %v", s, err)
		}
		wait = d
	}
	period, _ := dig(c, "startupProbe", "periodSeconds").(int)
	failures, _ := dig(c, "startupProbe", "failureThreshold").(int)
	delay, _ := dig(c, "startupProbe", "initialDelaySeconds").(int)
	if p := dig(c, "startupProbe", "httpGet", "path"); p != "/healthz" || time.Duration(delay+period*failures)*time.Second < wait+10*time.Second {
		t.Errorf("start-up probe on %v for %ds; want /healthz for longer than state.postgres.connect_wait (%s) and the start after it", p, delay+period*failures, wait)
	}
	secret, _ := dig(c, "envFrom", 0, "secretRef", "name").(string)
	if secret == "" {
		t.Fatal("the container takes no environment from a Secret")
	}
	sec := yamlDocs(t, "../../deploy/kubernetes/secret.example.yaml")[0]
	if sec["kind"] != "Secret" || dig(sec, "metadata", "name") != secret {
		t.Fatalf("secret.example.yaml is not the Secret %q the Deployment reads", secret)
	}
	data, _ := dig(sec, "stringData").(map[string]any)
	all, _ := configVars(t)
	for _, v := range all {
		if _, ok := data[v]; !ok {
			t.Errorf("the Secret has no %s, which the config names", v)
		}
	}
	if sel := dig(pdb, "spec", "selector", "matchLabels"); sel == nil || dig(pdb, "spec", "maxUnavailable") == nil {
		t.Error("the PodDisruptionBudget selects nothing or bounds nothing")
	}
}
