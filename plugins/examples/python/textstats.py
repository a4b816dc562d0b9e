#!/usr/bin/python3
"""textstats: an example OpenTalon plugin written in Python.

It speaks the same handshake as every plugin (docs/plugins.md): serve
PluginService on the unix socket named by OPENTALON_PLUGIN_SOCKET, and use
the private state service on OPENTALON_STATE_SOCKET. Besides its action
it offers two more extension points on the same socket: a request hook
(HookService: it counts the words of each message into its metadata) and
an HTTP route (HTTPService: GET /api/plugins/textstats/stats, behind the
gateway's API key).

Needs Debian's python3-grpcio and python3-protobuf, and the stubs
generated from proto/plugin.proto:

    protoc -I proto --python_out=DIR --grpc_python_out=DIR \
        --plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin plugin.proto

with DIR on PYTHONPATH.
"""

import os
import signal
import sys
from concurrent import futures

import grpc

import plugin_pb2
import plugin_pb2_grpc


class TextStats(plugin_pb2_grpc.PluginServiceServicer):
    def __init__(self, state):
        self.state = state

    def Capabilities(self, request, context):
        return plugin_pb2.PluginCapabilities(
            name="textstats",
            description="Count words, lines and characters of a text.",
            actions=[
                plugin_pb2.Action(
                    name="count",
                    description="Count the words, lines and characters of text.",
                    parameters=[plugin_pb2.Parameter(name="text", description="the text", type="string", required=True)],
                ),
            ],
            # A pre hook at order 50 (Lua scripts numbered below 50 run
            # before it) and one route under /api/plugins/textstats/.
            hooks=[plugin_pb2.HookDecl(stage="pre", order=50)],
            routes=[plugin_pb2.RouteDecl(method="GET", path="stats")],
        )

    def Execute(self, request, context):
        resp = plugin_pb2.ToolResultResponse(call_id=request.id)
        if request.action != "count":
            resp.error = "unknown action %r: use count" % request.action
            return resp
        text = request.args.get("text", "")
        got = self.state.Get(plugin_pb2.StateGetRequest(key="calls"))
        calls = int(got.value) + 1 if got.found else 1
        self.state.Set(plugin_pb2.StateSetRequest(key="calls", value=str(calls)))
        resp.content = "words=%d lines=%d characters=%d calls=%d" % (
            len(text.split()), len(text.splitlines()), len(text), calls)
        return resp


class Hooks(plugin_pb2_grpc.HookServiceServicer):
    """The request hook: adds the message's word count to its metadata."""

    def PreHook(self, request, context):
        return plugin_pb2.HookResponse(metadata={"words": str(len(request.text.split()))})

    def PostHook(self, request, context):
        return plugin_pb2.HookResponse()


class Routes(plugin_pb2_grpc.HTTPServiceServicer):
    """GET stats: how often count ran, as JSON."""

    def __init__(self, state):
        self.state = state

    def HandleHTTP(self, request, context):
        if request.path != "stats" or request.method != "GET":
            return plugin_pb2.HTTPResponse(status=404, body=b"not found")
        got = self.state.Get(plugin_pb2.StateGetRequest(key="calls"))
        calls = int(got.value) if got.found else 0
        return plugin_pb2.HTTPResponse(
            status=200,
            headers=[plugin_pb2.Header(name="Content-Type", value="application/json")],
            body=('{"calls": %d}' % calls).encode(),
        )


def main():
    sock = os.environ.get("OPENTALON_PLUGIN_SOCKET")
    state_sock = os.environ.get("OPENTALON_STATE_SOCKET")
    if not sock or not state_sock:
        print("textstats: run me under the OpenTalon core (OPENTALON_PLUGIN_SOCKET is not set)", file=sys.stderr)
        return 1
    state = plugin_pb2_grpc.PluginStateStub(grpc.insecure_channel("unix:" + state_sock))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    plugin_pb2_grpc.add_PluginServiceServicer_to_server(TextStats(state), server)
    plugin_pb2_grpc.add_HookServiceServicer_to_server(Hooks(), server)
    plugin_pb2_grpc.add_HTTPServiceServicer_to_server(Routes(state), server)
    server.add_insecure_port("unix:" + sock)
    server.start()
    print("textstats ready", file=sys.stderr, flush=True)
    signal.signal(signal.SIGTERM, lambda *_: server.stop(1))
    server.wait_for_termination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
