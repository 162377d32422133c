"""A scripted OpenAI-compatible HTTP server on 127.0.0.1 that misbehaves on demand.

Each request to /v1/chat/completions takes the next entry of `script`:
  ("ok", text)     a normal answer (streamed when the request asks for a stream)
  ("status", code) an error status (429, 500, ...)
  ("hang", secs)   sleep past the client's timeout, then answer
  ("cut", text)    a stream that stops mid-way without [DONE]
  ("empty", None)  a 200 with no choices
When the script runs out the last entry repeats.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FaultServer:
    def __init__(self, *script):
        self.script = list(script)
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                server.requests.append(body)
                kind, arg = server.script.pop(0) if len(server.script) > 1 else server.script[0]
                if kind == "status":
                    return self._json(arg, {"error": {"message": f"scripted {arg}", "type": "server_error"}})
                if kind == "hang":
                    time.sleep(arg)
                    kind, arg = "ok", "late"
                if kind == "empty":
                    return self._json(
                        200, {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []}
                    )
                if body.get("stream"):
                    return self._stream(arg, cut=(kind == "cut"))
                self._json(
                    200,
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "m",
                        "choices": [
                            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": arg}}
                        ],
                        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
                    },
                )

            def _json(self, code, obj):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, text, cut):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                pieces = [text[i : i + 5] for i in range(0, len(text), 5)]
                if cut:
                    pieces = pieces[: max(1, len(pieces) // 2)]
                for p in pieces:
                    chunk = {
                        "id": "x",
                        "object": "chat.completion.chunk",
                        "created": 0,
                        "model": "m",
                        "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}],
                    }
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                if cut:
                    self.wfile.write(b'data: {"id": "x", "choi')  # torn JSON, then the connection drops
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(b"data: [DONE]\n\n")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
