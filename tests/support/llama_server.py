"""llama-cpp-python's OpenAI-compatible server on a loopback port: a real peer for the openai engine.

One server serves the whole test session (its model loads once); the first test that needs it
starts it. Its output goes to a log file, because the server prints a line when a client goes
away mid-stream, which is how tests see, from the server's side, that Stop reached it.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import psutil

from conversations.engines.llamacpp import embedded_model_path
from tests.support.servers import answers, free_port, wait_until_serving

DISCONNECT_LINE = "Disconnected from client"


class LlamaServer:
    """`chat_format`: one of llama-cpp-python's chat handlers instead of the GGUF's template
    (chatml-function-calling: tools, a named tool_choice held to its parameters by a grammar)."""

    def __init__(self, chat_format: str | None = None) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.log_path = Path(tempfile.mkdtemp(prefix="llama-server-")) / "server.log"
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(embedded_model_path()),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--n_ctx",
                "2048",
                "--n_threads",
                "1",
                # By default a new request cuts off the one streaming; we want it to wait.
                "--interrupt_requests",
                "False",
                "--verbose",
                "False",
                *(["--chat_format", chat_format] if chat_format else []),
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.ps = psutil.Process(self.process.pid)

    def wait_ready(self, timeout: float = 90) -> None:
        wait_until_serving(
            self.process,
            answers(f"{self.base_url}/models"),
            name="llama.cpp's server",
            log=lambda: self.log()[-2000:],
            timeout=timeout,
            interval=0.2,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def disconnects(self) -> int:
        """How many times the server noticed a client leave in the middle of a stream."""
        return self.log().count(DISCONNECT_LINE)

    def cpu_seconds(self) -> float:
        times = self.ps.cpu_times()
        return float(times.user + times.system)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


_server: LlamaServer | None = None


def shared_server() -> LlamaServer:
    """The session's server, started on first use."""
    global _server
    if _server is None:
        _server = LlamaServer()
        try:
            _server.wait_ready()
        except Exception:
            _server.stop()
            _server = None
            raise
    return _server


def stop_shared_server() -> None:
    global _server
    if _server is not None:
        _server.stop()
        _server = None
