package sdk

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	pluginpb "github.com/opentalon/opentalon/proto"
)

// Environment variables of the handshake (docs/plugins.md).
const (
	EnvPluginSocket = "OPENTALON_PLUGIN_SOCKET"
	EnvStateSocket  = "OPENTALON_STATE_SOCKET"
	EnvAPIURL       = "OPENTALON_API_URL"
	EnvAPIKey       = "OPENTALON_API_KEY"
)

// Plugin is what a plugin author implements. Methods may be called
// concurrently. Besides its actions a plugin may offer the other
// extension points by implementing their interfaces (and declaring
// hooks, routes and schedules in Capabilities): PreHooker, PostHooker,
// http.Handler, Scheduler, Notifier, Authorizer, BlobStore, Provider.
// A plugin with no actions returns "" from an Execute it never gets.
type Plugin interface {
	// Capabilities describes the plugin; it is also the health check, so
	// it must be cheap.
	Capabilities() Capabilities
	// Execute runs one action. A returned error becomes the result's
	// error field; the text is shown to the LLM.
	Execute(ctx context.Context, call Call) (string, error)
}

// FilePlugin is an optional Plugin capability: an action that makes
// files (a chart, a report). When a plugin has it, ExecuteFiles is called
// instead of Execute.
type FilePlugin interface {
	ExecuteFiles(ctx context.Context, call Call) (Result, error)
}

// Result is the answer of ExecuteFiles: the text the LLM reads and the
// files sent to the user with the answer (the LLM is told their names).
type Result struct {
	Text  string
	Files []File
}

// File is one file a result carries.
type File struct {
	// Name is what the user sees ("chart.png"); a path is cut to its base.
	Name string
	// MIME is the media type ("image/png"); Data the content.
	MIME string
	Data []byte
}

// Capabilities is the plugin's declaration.
type Capabilities struct {
	Name        string // letters, digits, '-', '_'
	Description string
	Actions     []Action
	// Hooks, Routes and Schedules declare the extension points the
	// plugin implements besides its actions.
	Hooks     []Hook
	Routes    []Route
	Schedules []Schedule
}

// Action is one thing the plugin can do.
type Action struct {
	Name        string
	Description string
	Params      []Param
	// PostProcess asks the core to run one LLM call over the output with
	// PostProcessPrompt as the system prompt.
	PostProcess       bool
	PostProcessPrompt string
}

// Param is one argument of an action; Type is a JSON schema type: string
// (default), number, integer, boolean, array (of strings) or object.
// Arguments always arrive as strings: a string as it is, any other value
// as its compact JSON text.
type Param struct {
	Name        string
	Description string
	Type        string
	Required    bool
}

// Call is one request from the core.
type Call struct {
	ID     string
	Action string
	Args   map[string]string
}

// Serve serves p on the socket the core named in OPENTALON_PLUGIN_SOCKET
// until SIGTERM or SIGINT.
func Serve(p Plugin) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return ServeContext(ctx, p)
}

// ServeContext is Serve with a caller-controlled lifetime.
func ServeContext(ctx context.Context, p Plugin) error {
	path := os.Getenv(EnvPluginSocket)
	if path == "" {
		return fmt.Errorf("%s is not set: this program is an OpenTalon plugin; list it in plugins.tools.plugins or put it in plugins.tools.plugin_dir and the core will start it", EnvPluginSocket)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", path, err)
	}
	return ServeListener(ctx, parentOnly{Listener: l, parent: os.Getppid()}, p)
}

// maxMessage bounds one gRPC message the plugin receives (a blob, a
// request body): as large as the core sends.
const maxMessage = 32 << 20

// ServeListener serves p on l until ctx ends.
func ServeListener(ctx context.Context, l net.Listener, p Plugin) error {
	if err := checkImplements(p, p.Capabilities()); err != nil {
		return err
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(maxMessage), grpc.MaxSendMsgSize(maxMessage))
	pluginpb.RegisterPluginServiceServer(srv, &server{p: p})
	registerExtensions(srv, p)
	go func() {
		<-ctx.Done()
		srv.GracefulStop()
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

type server struct {
	pluginpb.UnimplementedPluginServiceServer
	p Plugin
}

func (s *server) Capabilities(context.Context, *emptypb.Empty) (*pluginpb.PluginCapabilities, error) {
	return capabilitiesProto(s.p, s.p.Capabilities()), nil
}

func (s *server) Execute(ctx context.Context, req *pluginpb.ToolCallRequest) (resp *pluginpb.ToolResultResponse, err error) {
	resp = &pluginpb.ToolResultResponse{CallId: req.GetId()}
	defer func() {
		if r := recover(); r != nil {
			resp.Content, resp.Error = "", fmt.Sprintf("the plugin failed: %v", r)
		}
	}()
	args := req.GetArgs()
	if args == nil {
		args = map[string]string{}
	}
	call := Call{ID: req.GetId(), Action: req.GetAction(), Args: args}
	var xerr error
	if fp, ok := s.p.(FilePlugin); ok {
		var res Result
		res, xerr = fp.ExecuteFiles(ctx, call)
		resp.Content = res.Text
		for _, f := range res.Files {
			resp.Files = append(resp.Files, &pluginpb.File{Name: f.Name, MimeType: f.MIME, Data: f.Data})
		}
	} else {
		resp.Content, xerr = s.p.Execute(ctx, call)
	}
	if xerr != nil {
		resp.Error = xerr.Error()
	}
	return resp, nil
}
