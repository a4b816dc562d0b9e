package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/opentalon/opentalon/core"
)

// Load reads the config file at path: it substitutes ${VAR} and
// ${VAR:-default} from env, decodes strictly over Default(), expands "~"
// and relative paths, and validates. A file that configures no provider and
// no routing.primary gets the provider LoadDefault would pick from env. Every problem found is returned at
// once in an *Errors (reachable with errors.As), wrapped in a core.Error of
// kind core.KindInvalid.
func Load(path string, env Env) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, core.Errorf(core.KindNotFound, "config file %s does not exist; create it (see examples/config.yaml) or pass --config FILE: %w", path, err)
		}
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return Parse(path, data, filepath.Dir(abs), env)
}

// Parse loads a config from data as Load does. name labels error messages;
// baseDir resolves relative paths.
func Parse(name string, data []byte, baseDir string, env Env) (*Config, error) {
	cfg, ps := parse(name, data, baseDir, env)
	if err := ps.err(); err != nil {
		return nil, &core.Error{Kind: core.KindInvalid, Err: err}
	}
	return cfg, nil
}

// parse is Parse with the problems returned beside the config (nil only
// when the YAML cannot be read at all).
func parse(name string, data []byte, baseDir string, env Env) (*Config, *problems) {
	cfg, ps := decode(name, data, env)
	if cfg != nil {
		if len(cfg.Models.Providers) == 0 && cfg.Routing.Primary == "" {
			providerFromEnv(cfg, env) // a file without providers uses the environment's
		}
		applyEnvDefaults(cfg, ps, env)
		cfg.resolvePaths(baseDir, homeDir(env))
		applyAliases(cfg, ps)
		validate(cfg, ps)
	}
	return cfg, ps
}

// envDefaults are the keys whose default comes from the environment, as
// in the embedded default and examples/config.yaml
// ("${OPENTALON_DATA_DIR:-~/.opentalon}"): the Docker image and the
// systemd unit set these variables, and a file that leaves the key out
// must not fall back to a home directory the service cannot use. The
// PostgreSQL DSN is one of them (examples/config.yaml: dsn:
// "${OPENTALON_POSTGRES_DSN:-}"): a replica's config may name only
// state.driver: postgres and take the secret from its environment.
var envDefaults = []struct {
	key, env string
	set      func(*Config, string)
}{
	{"state.data_dir", "OPENTALON_DATA_DIR", func(c *Config, v string) { c.State.DataDir = v }},
	{"server.listen", "OPENTALON_LISTEN", func(c *Config, v string) { c.Server.Listen = v }},
	{"server.api_key", "OPENTALON_API_KEY", func(c *Config, v string) { c.Server.APIKey = Secret(v) }},
	{"state.postgres.dsn", "OPENTALON_POSTGRES_DSN", func(c *Config, v string) { c.State.Postgres.DSN = Secret(v) }},
}

// applyEnvDefaults gives each key of envDefaults the file leaves out the
// value of its environment variable, when that is set and not empty.
func applyEnvDefaults(cfg *Config, ps *problems, env Env) {
	for _, d := range envDefaults {
		if _, given := ps.lines[d.key]; given {
			continue
		}
		if v, ok := env(d.env); ok && v != "" {
			d.set(cfg, v)
		}
	}
}

// decode parses, substitutes and decodes data over Default(). It returns a
// nil Config only when the YAML cannot be read at all.
func decode(name string, data []byte, env Env) (*Config, *problems) {
	ps := &problems{file: name, lines: map[string]int{}}
	cfg := Default()
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) || len(bytes.TrimSpace(data)) == 0 {
			return cfg, ps // an empty file is all defaults
		}
		line, msg := syntaxProblem(err.Error(), data)
		ps.add(line, "", "%s", msg)
		return nil, ps
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		ps.add(extra.Line, "", "the file holds more than one YAML document; keep one (remove the extra \"---\")")
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return cfg, ps
		}
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return cfg, ps
	}
	if root.Kind != yaml.MappingNode {
		ps.add(root.Line, "", "the top level must be a mapping of sections (state, queue, models, ...)")
		return nil, ps
	}
	w := &walker{ps: ps, env: env, seen: map[*yaml.Node]bool{}, valueLines: map[int][]lineValue{}}
	w.walk(root, reflect.ValueOf(cfg).Elem(), "", false)
	if err := root.Decode(cfg); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			for _, m := range te.Errors {
				if strings.Contains(m, "already defined at line") {
					continue // reported by the walker as a duplicate key
				}
				line := yamlLine(m)
				msg := explain(yamlMsg(m))
				ps.add(line, w.pathAt(line, m), "%s", msg)
			}
		} else {
			// A structural error (such as a duplicated key) stops the
			// decoder; validating a half-decoded config would mislead.
			line := yamlLine(err.Error())
			ps.add(line, "", "%s", explain(yamlMsg(err.Error())))
			return nil, ps
		}
	}
	if w.duplicates {
		return nil, ps // the decoder dropped data; validating would mislead
	}
	return cfg, ps
}

var lineRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`line (\d+): `) })

func yamlLine(msg string) int {
	if m := lineRe().FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

func yamlMsg(msg string) string {
	msg = strings.TrimPrefix(msg, "yaml: ")
	if loc := lineRe().FindStringIndex(msg); loc != nil && loc[0] == 0 {
		msg = msg[loc[1]:]
	}
	return msg
}

// walker checks keys against the typed tree, records the line of every key
// path and substitutes environment variables in scalars.
type walker struct {
	ps         *problems
	env        Env
	seen       map[*yaml.Node]bool
	valueLines map[int][]lineValue // line -> the values on it, in order
	duplicates bool                // a mapping repeats a key
}

// checkDuplicates reports keys given twice in one mapping.
func (w *walker) checkDuplicates(n *yaml.Node, path string) {
	first := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind != yaml.ScalarNode || k.Value == "<<" {
			continue
		}
		if l, dup := first[k.Value]; dup {
			w.duplicates = true
			w.ps.add(k.Line, join(path, k.Value), "duplicate key (first given at line %d); merge the two into one", l)
			continue
		}
		first[k.Value] = k.Line
	}
}

// lineValue is one value on a line: its key path and, for a scalar, its
// text.
type lineValue struct {
	path, value string
}

// pathAt is the key path a decoder message about line names: the last
// value on the line, unless the line holds several (a flow mapping such
// as "{ interval: -5m, chat: C1 }") and the message quotes one of them.
func (w *walker) pathAt(line int, msg string) string {
	vs := w.valueLines[line]
	if len(vs) == 0 {
		return ""
	}
	for i := len(vs) - 1; i >= 0; i-- {
		v := vs[i].value
		if v != "" && (strings.Contains(msg, `"`+v+`"`) || strings.Contains(msg, "`"+v+"`")) {
			return vs[i].path
		}
	}
	return vs[len(vs)-1].path
}

var unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()

// walk visits n, which decodes into def (a value holding the default), at
// key path path. disabled is true inside a section that is switched off.
func (w *walker) walk(n *yaml.Node, def reflect.Value, path string, disabled bool) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	t := def.Type()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
		def = reflect.Zero(t)
	}
	if n.Kind == yaml.ScalarNode {
		w.substitute(n, path, disabled)
		w.valueLines[n.Line] = append(w.valueLines[n.Line], lineValue{path, n.Value})
		return
	}
	// A list or a section where a value belongs is reported at its line
	// (nodes deeper on the same line, walked later, name their own).
	w.valueLines[n.Line] = append(w.valueLines[n.Line], lineValue{path: path})
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return // a custom scalar given a collection: decode reports it
	}
	if n.Kind == yaml.MappingNode {
		w.checkDuplicates(n, path)
	}
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		w.walkStruct(n, def, path, disabled)
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		elem := reflect.Zero(t.Elem())
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := join(path, k.Value)
			w.ps.lines[p] = k.Line
			w.walk(v, elem, p, disabled)
		}
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		elem := reflect.Zero(t.Elem())
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			w.ps.lines[p] = c.Line
			w.walk(c, elem, p, disabled)
		}
	}
	// Any other shape mismatch is reported by the decoder with its line.
}

func (w *walker) walkStruct(n *yaml.Node, def reflect.Value, path string, disabled bool) {
	fields := map[string][]int{}
	var names []string
	yamlFields(def.Type(), nil, fields, &names)
	// A section with an enabled switch that is off (explicitly, or by
	// default when the key is absent) does not need its variables set.
	if i, ok := fields["enabled"]; ok && def.FieldByIndex(i).Kind() == reflect.Bool {
		on := def.FieldByIndex(i).Bool()
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == "enabled" {
				v := n.Content[j+1]
				if v.Kind == yaml.ScalarNode {
					w.substitute(v, join(path, "enabled"), disabled)
					if b, err := strconv.ParseBool(strings.ToLower(v.Value)); err == nil {
						on = b
					}
				}
			}
		}
		disabled = disabled || !on
	}
	// A driver's own section (state.postgres) is switched off by another
	// driver (state.driver: sqlite, the default), as an enabled: false
	// is: its variables need not be set.
	driverOff := map[string]bool{}
	if i, ok := fields["driver"]; ok && def.FieldByIndex(i).Kind() == reflect.String {
		driver := def.FieldByIndex(i).String()
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == "driver" && n.Content[j+1].Kind == yaml.ScalarNode {
				v := n.Content[j+1]
				w.substitute(v, join(path, "driver"), disabled)
				if v.Value != "" { // empty keeps the default
					driver = v.Value
				}
			}
		}
		for _, d := range []string{DriverSQLite, DriverPostgres} {
			driverOff[d] = d != driver
		}
	}
	for j := 0; j+1 < len(n.Content); j += 2 {
		k, v := n.Content[j], n.Content[j+1]
		if k.Value == "<<" { // YAML merge key: its mapping has this struct's keys
			w.walk(v, def, path, disabled)
			continue
		}
		i, ok := fields[k.Value]
		p := join(path, k.Value)
		if !ok {
			where := "at the top level"
			if path != "" {
				where = "in " + path
			}
			hint := didYouMean(k.Value, names)
			if hint == "" {
				hint = "; valid keys: " + strings.Join(names, ", ")
			}
			w.ps.add(k.Line, "", "unknown key %q %s%s", k.Value, where, hint)
			continue
		}
		w.ps.lines[p] = k.Line
		w.walk(v, def.FieldByIndex(i), p, disabled || driverOff[k.Value])
	}
}

// yamlFields maps the YAML keys of struct type t to their field index
// paths, descending into fields tagged ",inline" (the common channel
// block); names collects the keys for suggestions.
func yamlFields(t reflect.Type, prefix []int, fields map[string][]int, names *[]string) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		idx := append(append([]int(nil), prefix...), i)
		if tag == "" && opts == "inline" && f.Type.Kind() == reflect.Struct {
			yamlFields(f.Type, idx, fields, names)
			continue
		}
		if tag == "" || tag == "-" {
			continue
		}
		fields[tag] = idx
		*names = append(*names, tag)
	}
}

// substitute expands ${...} in a scalar in place. A value that contained a
// substitution is typed by its result, so "${WORKERS:-4}" can fill an int;
// an empty result leaves the default. A result YAML would read as null
// ("null", "~") stays that text: a secret is never silently emptied.
func (w *walker) substitute(n *yaml.Node, path string, disabled bool) {
	if w.seen[n] {
		return
	}
	w.seen[n] = true
	r, err := expand(n.Value, w.env)
	if err != nil {
		w.ps.add(n.Line, path, "%v", err)
		return
	}
	if !r.changed {
		return
	}
	if len(r.missing) > 0 && !disabled {
		for _, name := range r.missing {
			w.ps.add(n.Line, path, "environment variable %s is not set; export %s=..., or give a default with ${%s:-value}", name, name, name)
		}
	}
	n.Value = r.value
	if n.Style&yaml.TaggedStyle != 0 {
		return // an explicit tag such as !!str keeps its type
	}
	n.Style = 0
	switch {
	case r.value == "":
		n.Tag = "!!null"
	case (&yaml.Node{Kind: yaml.ScalarNode, Value: r.value}).ShortTag() == "!!null":
		n.Tag = "!!str"
	default:
		n.Tag = ""
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
