"""Start ``vllm serve MODEL`` for a ``vllm:MODEL`` spec, wait until it is healthy, then talk to it.

The server starts on first use (or on :meth:`VLLMBackend.start`), on a free loopback port, with its
output in a log file. Startup fails with one clear message when vLLM is not installed, when no GPU
is visible, when the process exits early (quoting the end of its log), or when it is not healthy
within ``startup_timeout_s``. Once ``/health`` and ``/v1/models`` answer, requests go through
:class:`OpenAICompatBackend`. :meth:`aclose` stops the whole process group.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from memprobe_engine.errors import LLMError
from memprobe_engine.llm.backends.openai_compat import OpenAICompatBackend, ServerBackend
from memprobe_engine.llm.spec import ModelSpec

INSTALL_HINT = "pip install 'memprobe[vllm]'"
_POLL_S = 1.0
_LOG_TAIL_LINES = 25
_STOP_GRACE_S = 20.0


class VLLMBackend(ServerBackend):
    """A ``vllm serve`` child process and an OpenAI-compatible client pointed at it."""

    name = "vllm"

    def __init__(self, spec: ModelSpec, *, executable: str | None = None, require_gpu: bool = True) -> None:
        self.spec = spec
        self._executable = executable
        self._require_gpu = require_gpu
        self._process: asyncio.subprocess.Process | None = None
        self._inner: OpenAICompatBackend | None = None
        self._lock = asyncio.Lock()
        self.log_path: Path | None = None
        self.base_url: str | None = None

    @property
    def served_model(self) -> str:
        """The name requests must use: ``--served-model-name`` when given, else the model id."""
        args = list(self.spec.extra_args)
        for index, arg in enumerate(args):
            if arg == "--served-model-name" and index + 1 < len(args):
                return args[index + 1]
            if arg.startswith("--served-model-name="):
                return arg.split("=", 1)[1]
        return self.spec.model

    async def start(self) -> OpenAICompatBackend:
        """Start the server once; later calls return the ready client."""
        async with self._lock:
            if self._inner is None:
                self._inner = await self._launch()
            return self._inner

    async def aclose(self) -> None:
        if self._inner is not None:
            await self._inner.aclose()
            self._inner = None
        await self._stop()

    def _command(self, port: int) -> list[str]:
        executable = self._executable or shutil.which("vllm")
        if executable is None:
            raise LLMError(f"Model spec {self.spec.where()} needs vLLM, which is not installed: {INSTALL_HINT} "
                           f"(on a machine with a CUDA GPU), or reach an existing server with "
                           f"openai:MODEL@http://HOST:PORT/v1.")
        command = [executable, "serve", self.spec.model, "--host", "127.0.0.1"]
        if _explicit_port(self.spec.extra_args) is None:
            command += ["--port", str(port)]
        if self.spec.context_tokens is not None and not _has_flag(self.spec.extra_args, "--max-model-len"):
            command += ["--max-model-len", str(self.spec.context_tokens)]
        return command + list(self.spec.extra_args)

    async def _launch(self) -> OpenAICompatBackend:
        port = _explicit_port(self.spec.extra_args) or _free_port()
        command = self._command(port)
        if self._require_gpu and not _gpu_visible():
            raise LLMError(f"Model spec {self.spec.where()} starts vLLM, but no CUDA GPU is visible here "
                           f"(nvidia-smi lists none). Run on a GPU machine, or point the role at a running "
                           f"server with openai:MODEL@http://HOST:PORT/v1.")
        handle, name = tempfile.mkstemp(prefix="memprobe-vllm-", suffix=".log")
        self.log_path = Path(name)
        try:
            self._process = await asyncio.create_subprocess_exec(
                *command, stdin=subprocess.DEVNULL, stdout=handle, stderr=subprocess.STDOUT,
                start_new_session=True)
        except OSError as err:
            raise LLMError(f"Cannot start {command[0]} for {self.spec.where()}: {err.strerror}.") from None
        finally:
            os.close(handle)
        self.base_url = f"http://127.0.0.1:{port}/v1"
        await self._wait_ready(port)
        return OpenAICompatBackend(self.base_url, self.served_model, None, name=self.name,
                                   timeout_s=self.spec.timeout_s, extra_body=self.spec.extra_body)

    async def _wait_ready(self, port: int) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.spec.startup_timeout_s
        root = f"http://127.0.0.1:{port}"
        assert self._process is not None
        while True:
            if self._process.returncode is not None:
                raise LLMError(f"vllm serve {self.spec.model} exited with status {self._process.returncode} "
                               f"during startup ({self.spec.where()}). End of its log {self.log_path}:\n"
                               f"{self._log_tail()}")
            if await asyncio.to_thread(_ok, root + "/health") and \
                    await asyncio.to_thread(_ok, root + "/v1/models"):
                return
            if loop.time() > deadline:
                await self._stop()
                raise LLMError(f"vllm serve {self.spec.model} was not healthy after "
                               f"{self.spec.startup_timeout_s:.0f} s ({self.spec.where()}); raise "
                               f"startup_timeout_s in its [models.ROLE] table if the model is large. End of "
                               f"its log {self.log_path}:\n{self._log_tail()}")
            try:
                await asyncio.wait_for(self._process.wait(), timeout=_POLL_S)
            except asyncio.TimeoutError:
                pass

    def _log_tail(self) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        lines = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        return "\n".join(lines[-_LOG_TAIL_LINES:]) or "(empty log)"

    async def _stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.returncode is not None:
            return
        _signal_group(process.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), timeout=_STOP_GRACE_S)
        except asyncio.TimeoutError:
            _signal_group(process.pid, signal.SIGKILL)
            await process.wait()


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)  # the server was started in its own session: its group id is its pid
    except ProcessLookupError:
        pass


def _gpu_visible() -> bool:
    """True when ``nvidia-smi -L`` lists a GPU, or (without nvidia-smi) torch sees CUDA."""
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        try:
            listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return listed.returncode == 0 and "GPU" in listed.stdout
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never via a proxy


def _ok(url: str) -> bool:
    try:
        with _DIRECT.open(url, timeout=2.0) as response:
            return 200 <= int(response.status) < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _has_flag(args: tuple[str, ...], flag: str) -> bool:
    return any(arg == flag or arg.startswith(flag + "=") for arg in args)


def _explicit_port(args: tuple[str, ...]) -> int | None:
    for index, arg in enumerate(args):
        value = args[index + 1] if arg == "--port" and index + 1 < len(args) else \
            arg.split("=", 1)[1] if arg.startswith("--port=") else None
        if value is not None and value.isdigit():
            return int(value)
    return None
