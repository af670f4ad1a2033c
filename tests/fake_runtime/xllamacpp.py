"""A stand-in for the xllamacpp runtime, for tests of the embedded server's child process (tests only:
put this folder first on the child's PYTHONPATH). Its server answers ``/v1/models`` and ``/metrics``
like llama.cpp's, refuses a model file named ``broken.gguf`` as llama.cpp refuses a damaged one, loads
one named ``slow.gguf`` for 60 s (a first load on a small CPU: what a cancelled start must not wait
for), and its destructor takes 30 s, as llama.cpp's waits for the step in progress: a stop that ran it
would show."""

from __future__ import annotations

import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

METRICS = (b"llamacpp:prompt_tokens_total 1710\nllamacpp:prompt_seconds_total 60.5\n"
           b"llamacpp:tokens_predicted_total 42\nllamacpp:tokens_predicted_seconds_total 3.5\n")


class CommonParams:
    def __init__(self) -> None:
        self.model = SimpleNamespace(path="")
        self.cpuparams = SimpleNamespace(n_threads=0)
        self.cpuparams_batch = SimpleNamespace(n_threads=0)
        self.n_ubatch = 512
        self.api_keys: list[str] = []


class Server:
    def __init__(self, params: CommonParams) -> None:
        if params.model.path.endswith("broken.gguf"):
            print("llama_model_load: error loading model: tensor data is not within the file bounds",
                  file=sys.stderr, flush=True)
            raise RuntimeError("failed to load the model")
        if params.model.path.endswith("slow.gguf"):
            time.sleep(60)
        keys = list(params.api_keys)

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                if self.headers.get("Authorization") != f"Bearer {keys[0]}":
                    self.send_response(401)
                    self.end_headers()
                    return
                body = METRICS if self.path == "/metrics" else b'{"object": "list", "data": []}'
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        self.listening_address = f"127.0.0.1:{self._httpd.server_address[1]}"

    def __del__(self) -> None:
        time.sleep(30)
